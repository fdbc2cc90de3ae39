// paraplan-gui: explore the layout trade-off space of a plan spec.
//   paraplan-gui [SPEC]                                   interactive
//   paraplan-gui SPEC --screenshot out.png [--view NAME] [--select LAYOUT] [--validate]
//   paraplan-gui SPEC --replan-benchmark N                re-plan timing while drawing
// GLFW + OpenGL 3 + Dear ImGui; the Session (gui/model) holds everything shown.
#define GLFW_INCLUDE_NONE
#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "gui/model/session.hpp"
#include "gui/screenshot.hpp"
#include "gui/views/style.hpp"
#include "gui/views/views.hpp"

namespace fs = std::filesystem;
using namespace paraplan;
using namespace paraplan::gui;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string spec, screenshot, select, view = "overview", size = "1600x1000";
  bool validate = false, tooltip = false;
  int replan_benchmark = 0;
  double max_latency_ms = 0;
  std::string color_by, hover, click, filter, sort, dialog;
  bool fits_only = false;
  bool log_y = false;
  int width = 1600, height = 1000;
};

int fail(const std::string& msg) {
  std::cerr << "paraplan-gui: error: " << msg << "\n";
  return 2;
}

std::string exe_dir() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.parent_path().string();
}

// Input events seen; after one, a couple more frames are drawn so that ImGui
// settles (hover, click release) before the loop sleeps again.
int g_events = 0;
void count_event(GLFWwindow*) { ++g_events; }
void install_event_counters(GLFWwindow* w) {
  // ImGui's GLFW backend chains to callbacks installed before it.
  glfwSetCursorPosCallback(w, [](GLFWwindow* x, double, double) { count_event(x); });
  glfwSetMouseButtonCallback(w, [](GLFWwindow* x, int, int, int) { count_event(x); });
  glfwSetScrollCallback(w, [](GLFWwindow* x, double, double) { count_event(x); });
  glfwSetKeyCallback(w, [](GLFWwindow* x, int, int, int, int) { count_event(x); });
  glfwSetCharCallback(w, [](GLFWwindow* x, unsigned) { count_event(x); });
  glfwSetWindowSizeCallback(w, [](GLFWwindow* x, int, int) { count_event(x); });
  glfwSetWindowFocusCallback(w, [](GLFWwindow* x, int) { count_event(x); });
}

void glfw_error(int code, const char* text) { std::fprintf(stderr, "paraplan-gui: GLFW error %d: %s\n", code, text); }

GLFWwindow* open_window(int w, int h) {
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) return nullptr;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GL_TRUE);
  GLFWwindow* win = glfwCreateWindow(w, h, "paraplan", nullptr, nullptr);
  if (!win) {  // no 3.3 core context: take what the driver offers (the backend needs 3.0)
    glfwDefaultWindowHints();
    win = glfwCreateWindow(w, h, "paraplan", nullptr, nullptr);
  }
  if (!win) return nullptr;
  glfwMakeContextCurrent(win);
  glfwSwapInterval(1);
  return win;
}

// One frame: views, render; an optional PNG of it before the swap.
struct Frame {
  GLFWwindow* win;
  Session& s;
  AppRequests& req;
  bool no_mouse = false;  // screenshots: no hover from wherever the pointer happens to be
  ImVec2 mouse{-FLT_MAX, -FLT_MAX};  // ... but this position instead (--hover, --click)
  bool mouse_down = false;
  std::string png_error;
  double build_ms = 0, gl_ms = 0;  // last frame: views + ImGui::Render; GL drawing + swap

  void draw(const std::string& png_path = "") {
    const auto t0 = Clock::now();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (no_mouse) {
      ImGui::GetIO().MousePos = mouse;
      ImGui::GetIO().MouseDown[0] = mouse_down;
    }
    ImGui::NewFrame();
    s.ui.hovered_prev = s.ui.hovered;
    s.ui.hovered = -1;
    draw_menu_bar(s, req);
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    const float status_h = ImGui::GetFrameHeight() + 4;
    draw_views(s, vp->WorkPos, ImVec2(vp->WorkSize.x, vp->WorkSize.y - status_h));
    draw_status_bar(s, ImVec2(vp->WorkPos.x, vp->WorkPos.y + vp->WorkSize.y - status_h), ImVec2(vp->WorkSize.x, status_h));
    draw_dialogs(s, req);
    ImGui::Render();
    const auto t1 = Clock::now();
    int fw = 0, fh = 0;
    glfwGetFramebufferSize(win, &fw, &fh);
    glViewport(0, 0, fw, fh);
    glClearColor(0.08f, 0.08f, 0.1f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (!png_path.empty()) png_error = save_framebuffer_png(png_path, fw, fh);
    glfwSwapBuffers(win);
    build_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    gl_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  }
};

bool parse_point(const std::string& text, ImVec2* p) {
  return std::sscanf(text.c_str(), "%f,%f", &p->x, &p->y) == 2;
}

int run_screenshot(Frame& f, const Options& o) {
  Session& s = f.s;
  if (o.dialog == "open") open_file_dialog(FileTarget::kSpec, s.catalog.dir + "/examples");
  if (o.dialog == "export") open_export_dialog(0);
  if (!o.click.empty()) {  // press and release at a point, as a user's click
    for (int i = 0; i < 3; ++i) {  // let windows and popups appear and size themselves first
      s.update();
      f.draw();
    }
    parse_point(o.click, &f.mouse);
    for (int i = 0; i < 3; ++i) {
      f.mouse_down = i == 1;
      s.update();
      f.draw();
    }
    f.mouse = ImVec2(-FLT_MAX, -FLT_MAX);
  }
  if (!o.hover.empty()) parse_point(o.hover, &f.mouse);
  if (o.validate) {
    s.start_validate();
    const auto end = Clock::now() + std::chrono::minutes(5);
    while (s.validate().running() && Clock::now() < end) {
      glfwPollEvents();
      s.update();
      f.draw();
    }
  }
  // A few frames first: tables and auto-sized items settle on the second frame.
  for (int i = 0; i < 4; ++i) {
    glfwPollEvents();
    s.update();
    f.draw();
  }
  s.update();
  f.draw(o.screenshot);
  if (!f.png_error.empty()) return fail(f.png_error);
  const auto& d = s.detail();
  std::printf("paraplan-gui: wrote %s (view %s, selected %s)\n", o.screenshot.c_str(), o.view.c_str(),
              d ? d->layout_text.c_str() : "none");
  return 0;
}

// Edits the spec N times while drawing; prints how long each re-plan took to
// show up and the longest gap between frames meanwhile.
int run_benchmark(Frame& f, const Options& o) {
  Session& s = f.s;
  const int base_seq = s.inputs.spec.training.seq_length;
  std::vector<double> latency, plan_ms, apply_ms, gaps, build_ms, gl_ms;
  double idle_gap = 0;
  auto last = Clock::now();
  for (int i = 0; i < 20; ++i) {  // idle frames, for comparison
    glfwPollEvents();
    s.update();
    f.draw();
    const auto now = Clock::now();
    if (i >= 5) idle_gap = std::max(idle_gap, std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
  for (int k = 0; k < o.replan_benchmark; ++k) {
    set_seq_length(&s.inputs, k % 2 == 0 ? base_seq / 2 : base_seq);  // every candidate changes
    double worst = 0;
    last = Clock::now();
    const auto deadline = last + std::chrono::seconds(30);
    bool applied = false;
    while (!applied && Clock::now() < deadline) {
      glfwPollEvents();
      applied = s.update() && !s.planning();
      f.draw();
      build_ms.push_back(f.build_ms);
      gl_ms.push_back(f.gl_ms);
      const auto now = Clock::now();
      worst = std::max(worst, std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
    }
    latency.push_back(s.timing().latency_ms);
    plan_ms.push_back(s.timing().plan_ms + s.timing().prepare_ms);
    apply_ms.push_back(s.timing().apply_ms);
    gaps.push_back(worst);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const auto maxv = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
  const PlanSnapshot* p = s.plan();
  std::printf("re-plan benchmark: %s, %lld layouts evaluated (%lld fit), %d re-plans (seq %d <-> %d)\n",
              s.inputs.spec_path.c_str(), p ? (long long)p->plan.evaluated : 0LL, p ? (long long)p->plan.feasible : 0LL,
              o.replan_benchmark, base_seq / 2, base_seq);
  std::printf("  edit -> shown:           median %.1f ms, max %.1f ms\n", median(latency), maxv(latency));
  std::printf("  worker (search+strings): median %.1f ms, max %.1f ms\n", median(plan_ms), maxv(plan_ms));
  std::printf("  UI thread (chart, table, selection): median %.2f ms, max %.2f ms\n", median(apply_ms), maxv(apply_ms));
  std::printf("  longest frame gap while re-planning: %.1f ms (idle frames: %.1f ms)\n", maxv(gaps), idle_gap);
  std::printf("  per frame while re-planning: views + ImGui %.1f ms median, GL drawing + swap %.1f ms median\n",
              median(build_ms), median(gl_ms));
  if (o.max_latency_ms > 0 && median(latency) > o.max_latency_ms) {
    std::printf("FAIL: median latency above %.0f ms\n", o.max_latency_ms);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"paraplan-gui: explore the memory / step-time trade-off of every parallel layout"};
  app.add_option("SPEC", o.spec, "plan spec (YAML); default: the Llama-2-7B example");
  app.add_option("--screenshot", o.screenshot, "render one frame, write it as a PNG and exit");
  app.add_option("--view", o.view, "overview | inputs | table | chart | layout | validate")
      ->check(CLI::IsMember({"overview", "inputs", "table", "chart", "layout", "validate"}));
  app.add_option("--select", o.select, "select this layout (e.g. tp=2,pp=4,zero=1)");
  app.add_flag("--validate", o.validate, "with --screenshot: run validate on the selection first and wait for it");
  app.add_option("--size", o.size, "window size WxH (default 1600x1000)");
  app.add_option("--hover", o.hover, "with --screenshot: the mouse at X,Y (pixels), e.g. for a chart tooltip");
  app.add_option("--click", o.click, "with --screenshot: click at X,Y (pixels) first, e.g. a chart point");
  app.add_flag("--tooltip", o.tooltip, "with --screenshot: show the selected layout's tooltip in the chart");
  app.add_option("--dialog", o.dialog, "with --screenshot: open a dialog first: open | export")
      ->check(CLI::IsMember({"open", "export"}));
  app.add_option("--color-by", o.color_by, "zero | recompute | fits")->check(CLI::IsMember({"zero", "recompute", "fits"}));
  app.add_flag("--log-y", o.log_y, "log scale for the step time");
  app.add_option("--filter", o.filter, "table filter text, e.g. \"tp=8 zero=1\"");
  app.add_flag("--fits-only", o.fits_only, "table: only layouts that fit");
  app.add_option("--sort", o.sort, "table sort: rank|peak|step|tokens|mfu|...|layout, ':desc' for descending");
  app.add_option("--replan-benchmark", o.replan_benchmark, "edit the spec N times while drawing; print re-plan timings")
      ->check(CLI::Range(1, 1000));
  app.add_option("--max-latency-ms", o.max_latency_ms, "with --replan-benchmark: fail above this median latency");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "paraplan-gui: error: " << e.what() << " (see paraplan-gui --help)\n";
    return 2;
  }
  if (std::sscanf(o.size.c_str(), "%dx%d", &o.width, &o.height) != 2 || o.width < 320 || o.height < 240)
    return fail("--size: expected WxH of at least 320x240, got " + o.size);
  for (const std::string* p : {&o.hover, &o.click}) {
    ImVec2 v;
    if (!p->empty() && !parse_point(*p, &v)) return fail("--hover/--click: expected X,Y in pixels, got " + *p);
  }
  const bool batch = !o.screenshot.empty() || o.replan_benchmark > 0;

  Session s;
  const std::string dir = exe_dir();
  s.paraplan_exe = (fs::path(dir) / "paraplan").string();
  s.catalog = load_catalog(find_configs_dir(dir, PARAPLAN_SOURCE_CONFIGS));
  parse_view(o.view, &s.ui.focus);
  s.ui.log_y = o.log_y;
  s.ui.log_y_chosen = o.log_y;
  s.ui.pin_tooltip = o.tooltip;
  s.ui.filter.text = o.filter;
  s.ui.filter.fits_only = o.fits_only;
  if (!o.sort.empty()) {
    const size_t colon = o.sort.find(':');
    const std::string key = o.sort.substr(0, colon), dir = colon == std::string::npos ? "asc" : o.sort.substr(colon + 1);
    if (!parse_column(key, &s.ui.sort.column) || (dir != "asc" && dir != "desc"))
      return fail("--sort: expected a column key (rank, peak, step, tokens, mfu, ...) with :asc or :desc, got " + o.sort);
    s.ui.sort.ascending = dir == "asc";
  }
  if (o.color_by == "recompute") s.ui.color_by = ColorBy::kRecompute;
  if (o.color_by == "fits") s.ui.color_by = ColorBy::kFits;
  std::string spec = o.spec;
  if (spec.empty() && !s.catalog.dir.empty()) {
    const fs::path def = fs::path(s.catalog.dir) / "examples" / "llama2-7b-dgx-h100.yaml";
    if (fs::exists(def)) spec = def.string();
  }
  if (!spec.empty() && !load_spec_into(&s.inputs, spec) && batch) return fail(s.inputs.error);
  if (!o.select.empty() && s.inputs.loaded) {
    Layout l;
    std::string err;
    if (!resolve_layout_text(s.inputs.spec, o.select, &l, &err)) {
      if (batch) return fail("--select: " + err);
      s.ui.status = "--select: " + err;
    }
  }

  GLFWwindow* win = open_window(o.width, o.height);
  if (!win) return fail("cannot open a window (no display? run under xvfb-run for --screenshot)");
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the panes are laid out in code; nothing to save
  setup_style(15.0f);
  install_event_counters(win);
  ImGui_ImplGlfw_InitForOpenGL(win, true);
  ImGui_ImplOpenGL3_Init("#version 130");
  s.set_on_plan_done([] { glfwPostEmptyEvent(); });

  AppRequests req;
  Frame frame{win, s, req, batch, ImVec2(-FLT_MAX, -FLT_MAX), false, {}};
  int rc = 0;
  if (batch) {
    if (!s.wait_for_plan(std::chrono::seconds(120))) rc = fail("planning did not finish in 120 s");
    if (rc == 0 && !o.select.empty()) {
      std::string err;
      if (!s.select_text(o.select, &err)) rc = fail("--select: " + err);
    }
    s.ui.scroll_to_selection = true;  // the table shows the selected row
    if (rc == 0) rc = o.replan_benchmark > 0 ? run_benchmark(frame, o) : run_screenshot(frame, o);
  } else {
    bool selected = o.select.empty();
    int settle = 0;
    while (!glfwWindowShouldClose(win) && !req.quit) {
      // Sleep until input, a finished plan (posted event) or, while work runs, the next animation frame.
      const bool busy = s.planning() || s.validate().running() || settle > 0;
      const int events = g_events;
      glfwWaitEventsTimeout(busy ? 1.0 / 30 : 0.5);
      settle = g_events != events ? 3 : std::max(0, settle - 1);
      if (s.update()) settle = 3;
      if (!selected && s.plan()) {
        std::string err;
        if (!s.select_text(o.select, &err)) s.ui.status = "--select: " + err;
        s.ui.scroll_to_selection = true;
        selected = true;
      }
      if (!req.save_png.empty()) {
        frame.draw();  // one frame without the dialog that asked
        const std::string path = req.save_png;
        req.save_png.clear();
        frame.draw(path);
        s.ui.status = frame.png_error.empty() ? "saved " + path : frame.png_error;
        continue;
      }
      frame.draw();
    }
  }
  s.set_on_plan_done(nullptr);  // no wake-ups posted to a terminated GLFW
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(win);
  glfwTerminate();
  return rc;
}
