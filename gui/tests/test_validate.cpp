// Validate: parsing `paraplan validate --format json` (a canned document that
// follows the contract, in data/validate_dp2.json), the command line, and the
// background job against stand-in scripts (exit codes 0, 1, 2, a hang, bad JSON).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fixtures.hpp"
#include "gui/model/validate_job.hpp"
#include "gui/model/validate_result.hpp"
#include "planner/spec_loader.hpp"

using namespace paraplan;
using namespace paraplan::gui;
namespace fs = std::filesystem;

namespace {

std::string canned() { return read_text_file(test::repo("gui/tests/data/validate_dp2.json")); }

// A stand-in for the paraplan binary: a shell script with this body.
struct FakeExe {
  fs::path dir;
  std::string path;
  explicit FakeExe(const std::string& body) {
    std::string templ = (fs::temp_directory_path() / "paraplan-gui-test-XXXXXX").string();
    dir = mkdtemp(templ.data());
    path = (dir / "paraplan").string();
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
  }
  ~FakeExe() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

MemoryEstimate memory_with_heaviest_rank(int rank) {
  MemoryEstimate m;
  m.heaviest_rank = rank;
  return m;
}

}  // namespace

TEST_CASE("relative error of measured against predicted", "[validate]") {
  CHECK(*relative_error(100, 110) == Approx(0.10));
  CHECK(*relative_error(200, 150) == Approx(-0.25));
  CHECK(*relative_error(0, 0) == 0);
  CHECK_FALSE(relative_error(0, 4096).has_value());  // nothing predicted: no ratio
}

TEST_CASE("parsing the validate JSON contract", "[validate]") {
  const ValidateResult r = parse_validate_json(canned());
  CHECK(r.layout == "dp=2,tp=1,pp=1,vpp=1,sp=0,zero=0,recompute=none,mbs=1,schedule=1f1b");
  CHECK(r.backend == "cpu");
  CHECK(r.max_error == Approx(0.004295));
  CHECK(r.loss == std::vector<double>{6.93, 6.91});
  CHECK(r.step_predicted_s == Approx(0.5));
  CHECK(r.step_measured_s == Approx(0.62));
  CHECK(r.tolerance == std::optional<double>(0.02));  // optional keys beyond the contract
  CHECK(r.steps == 2);
  REQUIRE(r.ranks.size() == 2);

  const RankResult& r0 = r.ranks[0];
  CHECK(r0.rank == 0);
  CHECK(r0.stage == 0);
  CHECK(r0.error == Approx(0.004295));
  // The eight categories in the memory model's order, then the total.
  REQUIRE(r0.rows.size() == 9);
  const char* order[] = {"weights", "gradients", "optimizer", "activations", "transient",
                         "comm", "runtime", "fragmentation", "total"};
  for (int i = 0; i < 9; ++i) CHECK(r0.rows[i].name == order[i]);
  CHECK(r0.rows[0].predicted == 14211072);  // 3,552,768 params x 4 B (fp32)
  CHECK(*r0.rows[0].error == 0);
  CHECK(*r0.rows[3].error == Approx(0.05));   // activations 10.5 MB vs 10 MB
  CHECK(*r0.rows[4].error == Approx(-0.10));  // transient 1.8 MB vs 2 MB
  CHECK(*r0.rows[6].error == 0);              // runtime 0 vs 0
  // total: +300,000 B on 69,844,288 B.
  CHECK(*r0.rows[8].error == Approx(300000.0 / 69844288.0));

  // A category only the validator knows comes after the eight, before the total.
  const RankResult& r1 = r.ranks[1];
  REQUIRE(r1.rows.size() == 10);
  CHECK(r1.rows[8].name == "untracked");
  CHECK(r1.rows[8].predicted == 0);
  CHECK(r1.rows[8].measured == 4096);
  CHECK_FALSE(r1.rows[8].error.has_value());
  CHECK(r1.rows[9].name == "total");
}

TEST_CASE("validate JSON errors name the key", "[validate]") {
  const auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_validate_json(text);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(error_of("not json"), Catch::Contains("not JSON"));
  CHECK_THAT(error_of("[]"), Catch::Contains("expected an object"));
  CHECK_THAT(error_of(R"({"layout": "x", "max_error": 0})"), Catch::Contains("ranks: missing"));
  CHECK_THAT(error_of(R"({"layout": "x", "max_error": 0, "ranks": [{"rank": 0, "stage": 0, "error": 0,
              "predicted": {"total": 1}}]})"),
             Catch::Contains("ranks[0].measured: missing"));
  CHECK_THAT(error_of(R"({"layout": "x", "max_error": 0, "ranks": [{"rank": 0, "stage": 0, "error": 0,
              "predicted": {"total": "big"}, "measured": {"total": 1}}]})"),
             Catch::Contains("ranks[0].predicted.total: expected a number of bytes"));
  CHECK_THAT(error_of(R"({"layout": 3})"), Catch::Contains("layout: expected a string"));
}

TEST_CASE("the validate command line", "[validate]") {
  // 8 ranks or fewer run in full.
  auto a = validate_argv("/b/paraplan", "/t/spec.yaml", parse_layout("dp=2,tp=1,pp=1"),
                         memory_with_heaviest_rank(0), ValidateOptions{});
  CHECK(a == std::vector<std::string>{"/b/paraplan", "validate", "/t/spec.yaml", "--layout",
                                      "dp=2,tp=1,pp=1,vpp=1,sp=0,zero=0,recompute=none,mbs=1,schedule=1f1b",
                                      "--format", "json", "--steps", "2", "--backend", "cpu"});
  // 8 x 8 x 4 = 256 ranks: one emulated, the heaviest (rank 64 here).
  ValidateOptions o;
  o.steps = 0;  // the validator's default: no --steps
  o.backend_cpu = false;
  a = validate_argv("/b/paraplan", "/t/spec.yaml", parse_layout("dp=8,tp=8,pp=4"),
                    memory_with_heaviest_rank(64), o);
  CHECK(a == std::vector<std::string>{"/b/paraplan", "validate", "/t/spec.yaml", "--layout",
                                      "dp=8,tp=8,pp=4,vpp=1,sp=0,zero=0,recompute=none,mbs=1,schedule=1f1b",
                                      "--format", "json", "--emulate-rank", "64"});
  CHECK(shell_line({"/b/paraplan", "a b", "x'y", "dp=2,tp=1"}) == "/b/paraplan 'a b' 'x'\\''y' dp=2,tp=1");
}

TEST_CASE("validate job: exit codes, failures and cancel", "[validate][process]") {
  const Layout l = parse_layout("dp=2,tp=1,pp=1");
  const MemoryEstimate m = memory_with_heaviest_rank(0);
  const std::string json_path = test::repo("gui/tests/data/validate_dp2.json");

  SECTION("exit 0: within tolerance, parsed") {
    FakeExe exe("cat '" + json_path + "'; exit 0");
    ValidateJob job;
    REQUIRE(job.start(exe.path, "spec: x\n", l, m, ValidateOptions{}));
    CHECK(job.running());
    REQUIRE(job.wait(10));
    CHECK(job.status() == ValidateJob::Status::kPassed);
    REQUIRE(job.result().has_value());
    CHECK(job.result()->ranks.size() == 2);
    CHECK_THAT(job.message(), Catch::Contains("max error 0.4%"));
  }
  SECTION("exit 1: outside tolerance, still parsed") {
    FakeExe exe("cat '" + json_path + "'; exit 1");
    ValidateJob job;
    REQUIRE(job.start(exe.path, "spec: x\n", l, m, ValidateOptions{}));
    REQUIRE(job.wait(10));
    CHECK(job.status() == ValidateJob::Status::kOutside);
    CHECK(job.result().has_value());
  }
  SECTION("exit 2: the stderr line is the message") {
    FakeExe exe("echo 'paraplan: error: spec.yaml: layout.dp: expected 8 GPUs' >&2; exit 2");
    ValidateJob job;
    REQUIRE(job.start(exe.path, "spec: x\n", l, m, ValidateOptions{}));
    REQUIRE(job.wait(10));
    CHECK(job.status() == ValidateJob::Status::kFailed);
    CHECK_THAT(job.message(), Catch::Contains("code 2") && Catch::Contains("layout.dp: expected 8 GPUs"));
    CHECK_FALSE(job.result().has_value());
  }
  SECTION("exit 0 with output that is not JSON") {
    FakeExe exe("echo 'hello'; exit 0");
    ValidateJob job;
    REQUIRE(job.start(exe.path, "spec: x\n", l, m, ValidateOptions{}));
    REQUIRE(job.wait(10));
    CHECK(job.status() == ValidateJob::Status::kFailed);
    CHECK_THAT(job.message(), Catch::Contains("not JSON"));
  }
  SECTION("the spec and arguments reach the child") {
    FakeExe exe("if grep -q 'model: tiny' \"$2\"; then echo \"$@\" >&2; else echo 'no spec' >&2; fi; exit 2");
    ValidateJob job;
    REQUIRE(job.start(exe.path, "model: tiny\n", l, m, ValidateOptions{}));
    REQUIRE(job.wait(10));
    CHECK_THAT(job.message(), Catch::Contains("--layout dp=2,tp=1,pp=1") && Catch::Contains("--backend cpu"));
  }
  SECTION("cancel also stops descendants in other process groups (as mpiexec and its ranks are)") {
    // The grandchild leaves the group with setsid, as `paraplan validate` starts mpiexec.
    const fs::path pidfile = fs::temp_directory_path() / ("paraplan-gui-test-" + std::to_string(getpid()) + ".pid");
    FakeExe exe("setsid sh -c 'echo $$ > " + pidfile.string() + "; exec sleep 30' & sleep 30");
    ValidateJob job;
    REQUIRE(job.start(exe.path, "spec: x\n", l, m, ValidateOptions{}));
    pid_t grandchild = 0;
    for (int i = 0; i < 300 && grandchild == 0; ++i) {
      usleep(10000);
      std::ifstream(pidfile) >> grandchild;
    }
    REQUIRE(grandchild > 0);
    job.cancel();
    REQUIRE(job.wait(5));
    CHECK(job.status() == ValidateJob::Status::kCancelled);
    // Gone (or a zombie waiting for init) within 2 s.
    const auto gone = [&] {
      std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
      std::string pid, comm, state;
      return !(stat >> pid >> comm >> state) || state == "Z";
    };
    for (int i = 0; i < 200 && !gone(); ++i) {
      job.poll();
      usleep(10000);
    }
    CHECK(gone());
    fs::remove(pidfile);
  }
  SECTION("cancel stops a run that hangs, and what it started") {
    FakeExe exe("echo 'step 1/5' >&2; sleep 30 & sleep 30; exit 0");
    ValidateJob job;
    REQUIRE(job.start(exe.path, "spec: x\n", l, m, ValidateOptions{}));
    const auto t0 = std::chrono::steady_clock::now();
    // The progress line shows up while it runs.
    for (int i = 0; i < 200 && job.last_stderr_line().empty(); ++i) {
      job.poll();
      usleep(10000);
    }
    CHECK(job.last_stderr_line() == "step 1/5");
    job.cancel();
    REQUIRE(job.wait(5));
    CHECK(job.status() == ValidateJob::Status::kCancelled);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
  SECTION("a missing binary is a clear message, not a crash") {
    ValidateJob job;
    CHECK_FALSE(job.start("/nonexistent/paraplan", "spec: x\n", l, m, ValidateOptions{}));
    CHECK(job.status() == ValidateJob::Status::kFailed);
    CHECK_THAT(job.message(), Catch::Contains("paraplan not found at /nonexistent/paraplan"));
  }
}
