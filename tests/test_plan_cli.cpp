// `paraplan plan`: the JSON contract, --output, and the worked example.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "planner/plan_report.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace paraplan::test;
using nlohmann::json;

TEST_CASE("time.host_wait_s: nanotron's measured host time per layer shows in the JSON and sums into the step",
          "[plan][cli]") {
  // Llama-2-7B under nanotron at tp 8, micro-batch 1: ~2.2 ms of GPU per layer per
  // micro-batch against the 4.63 ms its host needs (costmodel/frameworks/nanotron.cpp).
  TempDir dir;
  const Result r = run_paraplan({"explain", "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml", "--framework", "nanotron",
                                 "--layout", "dp=1,tp=8,pp=1,sp=1,zero=0,mbs=1", "--format", "json"},
                                dir.path());
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json t = json::parse(r.out).at("time");
  const double m = t["microbatches"].get<double>();
  CHECK(t["host_wait_s"].get<double>() > 0);
  // Every micro-batch lasts exactly its 32 layers' dispatch: 32 x 4.63 ms.
  CHECK(t["microbatch_s"].get<double>() == Approx(32 * 4.63e-3).epsilon(1e-9));
  CHECK(t["step_s"].get<double>() ==
        Approx(t["compute_s"].get<double>() + t["tp_comm_s"].get<double>() + t["pp_comm_s"].get<double>() +
               t["cp_comm_s"].get<double>() + t["ep_comm_s"].get<double>() + t["dp_comm_s"].get<double>() +
               t["bubble_s"].get<double>() + t["optimizer_s"].get<double>() + t["host_wait_s"].get<double>()));
  CHECK(t["host_wait_s"].get<double>() ==
        Approx(m * 32 * 4.63e-3 - t["compute_s"].get<double>() - t["tp_comm_s"].get<double>()).epsilon(1e-9));
}

TEST_CASE("plan JSON has every documented key", "[plan][cli]") {
  TempDir dir;
  const Result r = run_paraplan(
      {"plan", "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml", "--format", "json", "--top", "5"},
      dir.path());
  REQUIRE(r.code == 0);
  REQUIRE(r.err.empty());
  const json j = json::parse(r.out);
  for (const char* k : {"evaluated", "feasible", "rejected", "candidates", "pareto", "recommended",
                        "search_seconds"})
    CHECK(j.contains(k));
  CHECK(j["candidates"].size() == 5);
  CHECK(j["feasible"].get<long>() <= j["evaluated"].get<long>());
  for (const json& c : j["candidates"]) {
    for (const char* k : {"step_s", "compute_s", "tp_comm_s", "pp_comm_s", "cp_comm_s", "ep_comm_s", "dp_comm_s",
                          "bubble_s", "optimizer_s", "host_wait_s"})
      CHECK(c["time"].contains(k));
    CHECK(c["warnings"].is_array());
    for (const char* k : {"tokens_per_s", "tflops_per_gpu", "mfu"}) CHECK(c["throughput"].contains(k));
    for (const char* k : {"model_per_step", "hardware_per_step"}) CHECK(c["flops"].contains(k));
    // step = sum of its terms.
    const json& t = c["time"];
    CHECK(t["step_s"].get<double>() ==
          Approx(t["compute_s"].get<double>() + t["tp_comm_s"].get<double>() + t["pp_comm_s"].get<double>() +
                 t["cp_comm_s"].get<double>() + t["ep_comm_s"].get<double>() + t["dp_comm_s"].get<double>() +
                 t["bubble_s"].get<double>() + t["optimizer_s"].get<double>() + t["host_wait_s"].get<double>()));
  }
  // Ranked by step time, a tie within 0.05 % (bands of the fastest) by memory; the recommendation
  // is the first and it fits.
  const double fastest = j["candidates"][0]["time"]["step_s"].get<double>();
  for (size_t i = 1; i < j["candidates"].size(); ++i) {
    const json &a = j["candidates"][i - 1], &b = j["candidates"][i];
    const double sa = a["time"]["step_s"].get<double>(), sb = b["time"]["step_s"].get<double>();
    if (!b["warnings"].empty() || sa <= sb) continue;
    CHECK(sa - sb < 0.0005 * fastest);  // out of time order only within one band of 0.05 % of the fastest
    CHECK(a["peak_memory_bytes"].get<double>() <= b["peak_memory_bytes"].get<double>());
  }
  CHECK(j["recommended"]["layout"] == j["candidates"][0]["layout"]);
  CHECK(j["recommended"]["fits"] == true);
  CHECK(j["recommended"]["memory"]["total"].get<long>() <= j["recommended"]["usable_memory_bytes"].get<long>());
  // Tokens/s = global batch × seq / step: 512 × 4096 / step_s.
  const json& c0 = j["candidates"][0];
  CHECK(c0["throughput"]["tokens_per_s"].get<double>() ==
        Approx(512.0 * 4096 / c0["time"]["step_s"].get<double>()));
}

TEST_CASE("plan --output writes the file whole, and nothing on error", "[plan][cli]") {
  TempDir dir;
  Result r = run_paraplan({"plan", "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml", "--format",
                           "markdown", "--output", "@DIR@/plan.md"},
                          dir.path());
  REQUIRE(r.code == 0);
  CHECK(r.out.empty());
  const std::string md = read_file(dir.path() / "plan.md");
  CHECK(md.find("**Recommended:**") != std::string::npos);
  CHECK(md.find("| # | layout |") != std::string::npos);
  // A bad spec: exit 2 and no output file, not even a partial one.
  r = run_paraplan({"plan", "@DIR@/missing.yaml", "--output", "@DIR@/out.json"}, dir.path());
  CHECK(r.code == 2);
  CHECK_FALSE(fs::exists(dir.path() / "out.json"));
  // An unwritable output path: exit 2, one line naming it.
  r = run_paraplan({"plan", "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml", "--output",
                    "@DIR@/no/such/dir/plan.json"},
                   dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("plan.json") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("plan --output follows a symlink, refuses special files, and concurrent runs never mix (issue 12)",
          "[plan][cli][hardening]") {
  TempDir dir;
  const std::string spec = "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml";
  // A symlink: the file it names is replaced, the link stays a link.
  std::ofstream(dir.path() / "real.md") << "old\n";
  fs::create_symlink("real.md", dir.path() / "link.md");
  Result r = run_paraplan({"plan", spec, "--format", "markdown", "--output", "@DIR@/link.md"}, dir.path());
  REQUIRE(r.code == 0);
  CHECK(fs::is_symlink(fs::symlink_status(dir.path() / "link.md")));
  CHECK(read_file(dir.path() / "real.md").find("**Recommended:**") != std::string::npos);
  // A FIFO: refused (exit 2, one line), left as it is, nothing written.
  REQUIRE(::mkfifo((dir.path() / "fifo").c_str(), 0600) == 0);
  r = run_paraplan({"plan", spec, "--output", "@DIR@/fifo"}, dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("fifo: --output: is a FIFO") != std::string::npos);
  CHECK(fs::is_fifo(fs::status(dir.path() / "fifo")));
  // A device (read-only look: /dev/null is never replaced; as root it was).
  r = run_paraplan({"plan", spec, "--output", "/dev/null"}, dir.path());
  CHECK(r.code == 2);
  CHECK(fs::is_character_file(fs::status("/dev/null")));
  // Concurrent runs with different formats on one --output: each writes its own
  // temporary file, so the result is one whole report, never a mix.
  const std::string json_out = run_paraplan({"plan", spec, "--format", "json"}, dir.path()).out;
  const std::string csv_out = run_paraplan({"plan", spec, "--format", "csv"}, dir.path()).out;
  // 400 runs at once, as in the reproducer (22 of 400 failed then); each must succeed.
  const std::string run = shell_quote(PARAPLAN_BINARY) + " plan " + shell_quote(expand(spec, dir.path()));
  std::string cmd = "cd " + shell_quote(dir.path().string()) + " && for i in $(seq 1 200); do { " + run +
                    " --format json --output same.out || echo x >>failed; } & { " + run +
                    " --format csv --output same.out || echo x >>failed; } & done; wait";
  REQUIRE(std::system(("timeout 240 sh -c " + shell_quote(cmd)).c_str()) == 0);
  CHECK_FALSE(fs::exists(dir.path() / "failed"));
  const std::string out = read_file(dir.path() / "same.out");
  // search_seconds differs run to run: compare what precedes it.
  const auto head = [](const std::string& x) { return x.substr(0, x.find("search_seconds")); };
  CHECK((head(out) == head(json_out) || out.substr(0, 200) == csv_out.substr(0, 200)));
  CHECK((out.front() == '{') == (out.back() == '\n' && out[out.size() - 2] == '}'));
  for (const auto& e : fs::directory_iterator(dir.path()))
    CHECK(e.path().filename().string().find(".paraplan-") == std::string::npos);  // no temporary left
}

TEST_CASE("plan says when no layout is valid at all, not that they all run out of memory (issue 12)", "[plan][cli]") {
  TempDir dir;
  std::string spec = read_file(fs::path(PARAPLAN_SOURCE_DIR) / "configs/examples/llama2-7b-dgx-h100.yaml");
  spec = spec.substr(0, spec.find("search:")) + "search:\n  mbs: [536870912]\n";
  for (const char* rel : {"../models/", "../clusters/"})
    for (size_t at; (at = spec.find(rel)) != std::string::npos;)
      spec.replace(at, 3, std::string(PARAPLAN_SOURCE_DIR) + "/configs/");
  std::ofstream(dir.path() / "spec.yaml") << spec;
  const Result r = run_paraplan({"plan", "@DIR@/spec.yaml"}, dir.path());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("no valid layout: every layout the search tried is invalid") != std::string::npos);
  CHECK(r.out.find("runs out of memory") == std::string::npos);
  CHECK(r.out.find("batch_not_divisible_by_dp_mbs") != std::string::npos);
}

TEST_CASE("plan overrides: nodes, batch and sequence", "[plan][cli]") {
  TempDir dir;
  const Result r = run_paraplan({"plan", "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml", "--nodes",
                                 "2", "--global-batch-size", "256", "--seq-length", "2048",
                                 "--format", "json", "--top", "1"},
                                dir.path());
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["num_gpus"] == 16);
  const json& c = j["candidates"][0];
  // 256 sequences × 2048 tokens per step.
  CHECK(c["throughput"]["tokens_per_s"].get<double>() ==
        Approx(256.0 * 2048 / c["time"]["step_s"].get<double>()));
}

TEST_CASE("explain and check report the time breakdown", "[plan][cli]") {
  TempDir dir;
  const Result r = run_paraplan(
      {"check", "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml", "--format", "json"}, dir.path());
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["time"]["step_s"].get<double>() > 0);
  CHECK(j["throughput"]["mfu"].get<double>() > 0);
  CHECK(j["throughput"]["mfu"].get<double>() < 1);
  const Result e = run_paraplan({"explain", "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml"}, dir.path());
  REQUIRE(e.code == 0);
  CHECK(e.out.find("time: step") != std::string::npos);
}

TEST_CASE("plan's why line says when the recommendation ties with the runner-up, and what decided (issue 46)", "[plan]") {
  // Two hand-made candidates 3 % apart: within the rule's 5 % band of the fastest (1.0 s), a tie, which
  // the less exposed communication decides (a: none; b: 0.1 s of TP, 2 bands of 0.05 s).
  paraplan::Plan p;
  paraplan::Candidate a, b;
  a.layout = paraplan::parse_layout("dp=8,tp=1,pp=1,mbs=1");
  b.layout = paraplan::parse_layout("dp=4,tp=2,pp=1,mbs=1");
  a.fits = b.fits = true;
  a.time.step_s = a.time.clamped_step_s = 1.03, b.time.step_s = b.time.clamped_step_s = 1.0;
  a.time.compute_s = 1.03, b.time.compute_s = 0.9;
  b.time.tp_comm_s = 0.1;
  a.peak_bytes = std::int64_t(40) << 30, b.peak_bytes = std::int64_t(30) << 30;
  p.candidates = {a, b};
  p.feasible = 2;
  p.fastest_ranked_s = 1.0;
  const std::string why = paraplan::why_recommended(p);
  INFO(why);
  CHECK(why.find("ties with the runner-up dp=4,tp=2") != std::string::npos);
  CHECK(why.find("lie in one 5% band of the fastest (1.000 s), within the model's uncertainty") != std::string::npos);
  CHECK(why.find("picked for less exposed communication and pipeline bubble (0.000 s vs 0.100 s exposed)") !=
        std::string::npos);
  CHECK(why.find("% faster") == std::string::npos);
  // Beyond the band the percentage and the term that makes it are said.
  p.candidates[0].time.step_s = p.candidates[0].time.clamped_step_s = 1.0;
  p.candidates[0].time.compute_s = 1.0;
  p.candidates[1].time.step_s = p.candidates[1].time.clamped_step_s = 1.1;
  p.candidates[1].time.compute_s = 1.0;
  const std::string beyond = paraplan::why_recommended(p);
  INFO(beyond);
  CHECK(beyond.find("9.1% faster per step than the runner-up dp=4,tp=2,pp=1,vpp=1,sp=0,zero=0,recompute=none,mbs=1,"
                    "schedule=1f1b, beyond the model's 5% band, mostly through less tensor-parallel communication "
                    "(0.000 s vs 0.100 s)") != std::string::npos);
}

TEST_CASE("plan ranks layouts that fit only with an allocator flush after the others, and says so in CSV",
          "[plan][cli][memory]") {
  // nanotron's 3B benchmark model on 16 p5 nodes (the Playbook's setting): some layouts fit only if the caching
  // allocator frees the reduce-scatter inputs held for the NCCL stream (MemoryEstimate::flush_risk).
  TempDir dir;
  {
    std::ofstream spec(dir.path() / "spec.yaml");
    spec << "model: " << PARAPLAN_SOURCE_DIR << "/configs/models/nanotron-bench-3b.yaml\n"
         << "cluster: " << PARAPLAN_SOURCE_DIR << "/configs/clusters/h100-aws-p5.yaml\n"
         << "num_nodes: 16\n"
         << "training:\n  framework: nanotron\n  seq_length: 4096\n  global_batch_size: 256\n  flash_attention: true\n"
         << "search:\n  allow_tp_across_nodes: true\n";
  }
  const Result r = run_paraplan({"plan", "@DIR@/spec.yaml", "--format", "csv", "--top", "100000"}, dir.path());
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);
  CHECK(line ==
        "rank,layout,fits,peak_bytes,step_s,tokens_per_s,tflops_per_gpu,mfu,bubble_fraction,exposed_comm_fraction,"
        "with_held_bytes,flush_risk,warned,ranked_step_s");
  // usable = 79.65 GiB x 0.95: 85,523,536,282 - 4,276,176,814 B.
  const long long usable = 81'247'359'468LL;
  int flagged = 0, fitting = 0;
  bool warned_seen = false, order_ok = true, flags_ok = true;
  while (std::getline(in, line)) {
    // The layout is quoted and has commas: split the fields after it.
    const size_t q = line.rfind('"');
    REQUIRE(q != std::string::npos);
    std::vector<std::string> f;
    std::stringstream ss(line.substr(q + 2));
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    REQUIRE(f.size() == 12);
    const bool fits = f[0] == "1", flush = f[9] == "1", warned = f[10] == "1";
    const long long peak = std::stoll(f[1]), with_held = std::stoll(f[8]);
    if (!fits) continue;
    ++fitting;
    flagged += flush;
    // Flagged exactly where the held blocks would not fit beside the rest; a flagged layout is warned.
    flags_ok = flags_ok && with_held >= peak && flush == (with_held > usable) && (!flush || warned);
    // Among fitting layouts, every unwarned one ranks before every warned one.
    if (warned) warned_seen = true;
    else if (warned_seen) order_ok = false;
  }
  INFO(fitting << " fit, " << flagged << " of them flagged");
  CHECK(fitting > 100);
  CHECK(flagged > 0);
  CHECK(flags_ok);
  CHECK(order_ok);
}
