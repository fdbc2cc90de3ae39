// Checks a screenshot: a PNG that loads, is at least 320x200, and is not
// blank (not one flat colour: the most common colour covers < 97% of the
// pixels and there are at least 16 distinct colours).
#include <stb_image.h>

#include <cstdio>
#include <unordered_map>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: paraplan_png_check FILE.png\n");
    return 2;
  }
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(argv[1], &w, &h, &n, 3);
  if (!px) {
    std::fprintf(stderr, "%s: cannot load: %s\n", argv[1], stbi_failure_reason());
    return 1;
  }
  std::unordered_map<unsigned, long> count;
  for (long i = 0; i < long(w) * h; ++i)
    ++count[unsigned(px[3 * i]) << 16 | unsigned(px[3 * i + 1]) << 8 | px[3 * i + 2]];
  stbi_image_free(px);
  long top = 0;
  for (const auto& [colour, c] : count)
    if (c > top) top = c;
  const double share = double(top) / (double(w) * h);
  std::printf("%s: %dx%d, %zu colours, most common %.1f%% of pixels\n", argv[1], w, h, count.size(),
              100 * share);
  if (w < 320 || h < 200) return std::printf("too small\n"), 1;
  if (count.size() < 16 || share >= 0.97) return std::printf("blank\n"), 1;
  return 0;
}
