#include "gui/screenshot.hpp"

#include <GL/gl.h>
#include <stb_image_write.h>

#include <vector>

namespace paraplan::gui {

std::string save_framebuffer_png(const std::string& path, int w, int h) {
  if (w <= 0 || h <= 0) return "empty framebuffer";
  std::vector<unsigned char> px(size_t(w) * size_t(h) * 3);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, w, h, GL_RGB, GL_UNSIGNED_BYTE, px.data());
  if (glGetError() != GL_NO_ERROR) return "glReadPixels failed";
  stbi_flip_vertically_on_write(1);  // GL rows run bottom-up
  if (!stbi_write_png(path.c_str(), w, h, 3, px.data(), w * 3)) return "cannot write " + path;
  return "";
}

}  // namespace paraplan::gui
