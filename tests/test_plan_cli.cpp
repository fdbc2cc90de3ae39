// `paraplan plan`: the JSON contract, --output, and the worked example.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace paraplan::test;
using nlohmann::json;

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
    for (const char* k : {"step_s", "compute_s", "tp_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s",
                          "optimizer_s"})
      CHECK(c["time"].contains(k));
    for (const char* k : {"tokens_per_s", "tflops_per_gpu", "mfu"}) CHECK(c["throughput"].contains(k));
    for (const char* k : {"model_per_step", "hardware_per_step"}) CHECK(c["flops"].contains(k));
    // step = sum of its terms.
    const json& t = c["time"];
    CHECK(t["step_s"].get<double>() ==
          Approx(t["compute_s"].get<double>() + t["tp_comm_s"].get<double>() +
                 t["pp_comm_s"].get<double>() + t["dp_comm_s"].get<double>() +
                 t["bubble_s"].get<double>() + t["optimizer_s"].get<double>()));
  }
  // Ranked by step time; the recommendation is the first and it fits.
  for (size_t i = 1; i < j["candidates"].size(); ++i)
    CHECK(j["candidates"][i - 1]["time"]["step_s"].get<double>() <=
          j["candidates"][i]["time"]["step_s"].get<double>());
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
