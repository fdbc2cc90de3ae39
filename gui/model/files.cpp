#include "gui/model/files.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "planner/plan_report.hpp"

namespace paraplan::gui {

namespace fs = std::filesystem;

namespace {

bool is_configs(const fs::path& p) {
  std::error_code ec;
  return !p.empty() && fs::is_directory(p / "models", ec) && fs::is_directory(p / "clusters", ec);
}

std::vector<std::string> yaml_files(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".yaml" || p.extension() == ".yml") out.push_back(p.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string find_configs_dir(const std::string& exe_dir, const std::string& source_configs) {
  std::vector<fs::path> tries;
  if (const char* env = std::getenv("PARAPLAN_CONFIGS")) tries.emplace_back(env);
  if (!exe_dir.empty()) {
    tries.push_back(fs::path(exe_dir) / ".." / "configs");
    tries.push_back(fs::path(exe_dir) / ".." / "share" / "paraplan" / "configs");
  }
  if (!source_configs.empty()) tries.emplace_back(source_configs);
  tries.emplace_back("configs");
  for (const fs::path& p : tries)
    if (is_configs(p)) return p.lexically_normal().string();
  return "";
}

Catalog load_catalog(const std::string& dir) {
  Catalog c;
  c.dir = dir;
  if (dir.empty()) return c;
  c.models = yaml_files(fs::path(dir) / "models");
  c.clusters = yaml_files(fs::path(dir) / "clusters");
  c.examples = yaml_files(fs::path(dir) / "examples");
  return c;
}

std::vector<DirEntry> list_dir(const std::string& dir) {
  std::vector<DirEntry> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code e2;
    if (it->is_directory(e2)) {
      out.push_back({name, true});
    } else {
      const std::string ext = p.extension().string();
      if (ext == ".yaml" || ext == ".yml" || ext == ".json") out.push_back({name, false});
    }
  }
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) {
    if (a.is_dir != b.is_dir) return a.is_dir;
    return a.name < b.name;
  });
  const fs::path abs = fs::absolute(dir, ec);
  if (!ec && abs.has_parent_path() && abs != abs.root_path())
    out.insert(out.begin(), DirEntry{"..", true});
  return out;
}

std::string write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".paraplan-tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return "cannot write " + tmp;
    f << text;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return "write failed: " + tmp;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return "cannot write " + path + ": " + ec.message();
  }
  return "";
}

std::string export_plan(ExportFormat f, const Spec& spec, const Plan& plan, int top) {
  return render_plan(f == ExportFormat::kJson ? Format::kJson : Format::kMarkdown, spec, plan, top);
}

}  // namespace paraplan::gui
