// Writes the current OpenGL back buffer as a PNG (stb_image_write).
#pragma once

#include <string>

namespace paraplan::gui {

// Reads the back buffer (call after rendering, before the swap). Returns "" or the error.
std::string save_framebuffer_png(const std::string& path, int width, int height);

}  // namespace paraplan::gui
