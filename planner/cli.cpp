#include "planner/cli.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <string>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "costmodel/memory.hpp"
#include "costmodel/time.hpp"
#include "planner/layout_source.hpp"
#include "planner/plan_report.hpp"
#include "planner/report.hpp"
#include "planner/search.hpp"
#include "planner/spec_inputs.hpp"
#include "planner/spec_error.hpp"
#include "planner/spec_loader.hpp"
#include "planner/calibrate_cli.hpp"
#include "planner/catalog.hpp"
#include "planner/emit.hpp"
#include "planner/launch.hpp"
#include "planner/validate_cli.hpp"

namespace paraplan {

namespace {

// Options every single-layout command shares.
struct LayoutOptions {
  SpecInputs in;
  std::string format = "table";
  LayoutRequest req;
  std::string layout, megatron, deepspeed, framework;
  CLI::Option *layout_opt = nullptr, *megatron_opt = nullptr, *deepspeed_opt = nullptr, *framework_opt = nullptr;
  bool emit_framework = false;  // --emit chose `framework`
};

EmitTarget emit_target(const std::string& name) {
  EmitTarget t;
  if (!parse_emit_target(name, &t))
    throw SpecError("--emit", 0, "", std::string("expected ") + kEmitChoices + ", got '" + SpecError::printable(name, 60) + "'");
  return t;
}

const char* kFrameworkHelp =
    "whose memory accounting to predict: megatron | deepspeed | fsdp | nanotron | paraplan "
    "(overrides training.framework; --megatron-args implies megatron, --deepspeed-config deepspeed)";

// --framework NAME, checked here so that a bad name is a one-line error naming the flag.
void apply_framework(Spec* s, const std::string& name) {
  if (!parse_framework(name, &s->training.framework))
    throw SpecError("--framework", 0, "", std::string("expected ") + kFrameworkChoices + ", got '" + name + "'");
}

// SPEC, or --model/--gpus/--gpu, and the flags that override a spec (explain, check, plan).
void add_spec_options(CLI::App* cmd, SpecInputs* in) {
  cmd->add_option("SPEC", in->spec, "plan spec (YAML); or give --model, --gpus and --gpu instead");
  cmd->add_option("--model", in->model,
                  "a built-in model (paraplan models), a model YAML or a HuggingFace config.json");
  cmd->add_option("--gpus", in->gpus, "GPUs in the job (a multiple of the GPUs per node, or fewer than a node)")
      ->check(CLI::Range(1, kMaxGpus));
  cmd->add_option("--gpu", in->gpu, "a built-in GPU/cluster (paraplan gpus: h100, a100, h200, ...) or a cluster YAML");
  cmd->add_option("--gpus-per-node", in->gpus_per_node, "GPUs per node (overrides the cluster's)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--nodes", in->nodes, "override num_nodes of the spec")->check(CLI::Range(1, kMaxGpus));
  cmd->add_option("--seq-length", in->seq, "override training.seq_length (default without a spec: 4096)")
      ->check(CLI::Range(1, kMaxSeq));
  cmd->add_option("--global-batch-size", in->gbs,
                  "override training.global_batch_size (default without a spec: about 4M tokens)")
      ->check(CLI::Range(1, kMaxBatch));
}

void add_layout_options(CLI::App* cmd, LayoutOptions* o) {
  add_spec_options(cmd, &o->in);
  o->layout_opt = cmd->add_option("--layout", o->layout,
                  "layout, e.g. dp=8,tp=8,pp=4,vpp=2,sp=1,zero=1,recompute=selective,mbs=1,schedule=1f1b");
  o->megatron_opt = cmd->add_option("--megatron-args", o->megatron,
                  "the layout as Megatron-LM arguments, e.g. \"--tensor-model-parallel-size 8 ...\"");
  o->deepspeed_opt = cmd->add_option("--deepspeed-config", o->deepspeed, "the layout from a DeepSpeed JSON config");
  o->framework_opt = cmd->add_option("--framework", o->framework, kFrameworkHelp);
  cmd->add_option("--format", o->format, "table | json | markdown")
      ->check(CLI::IsMember({"table", "json", "markdown", "md"}));
}

// Architecture keys the model reads but does not model: said on stderr.
void print_caveats(const Model& m) {
  for (const std::string& c : m.caveats)
    std::cerr << "paraplan: note: model " << SpecError::printable(m.name, 80) << ": " << SpecError::printable(c, 300)
              << "\n";
}

struct Loaded {
  Spec spec;
  nlohmann::json defaults;  // what paraplan chose (resolve_spec)
  Layout layout;
  Format format;
  std::vector<std::string> ignored_flags;  // Megatron flags paraplan does not read
  std::vector<std::string> framework_defaults;  // what the launch configuration's framework defaulted
};

// -v: the launch flags that did not change the prediction, on stderr.
void print_ignored(const Loaded& l) {
  if (l.ignored_flags.empty()) return;
  std::string o = "paraplan: not read from the launch configuration (they do not change memory or time as modelled):";
  for (const std::string& f : l.ignored_flags) o += " " + SpecError::printable(f, 80);
  std::cerr << o << "\n";
}

Loaded load(LayoutOptions& o) {
  Loaded r;
  if (!parse_format(o.format, &r.format))
    throw SpecError("--format", 0, "", "expected table, json or markdown");
  ResolvedSpec rs = resolve_spec(o.in);
  r.spec = std::move(rs.spec);
  r.defaults = std::move(rs.defaults);
  print_caveats(r.spec.model);
  if (o.layout_opt->count()) o.req.layout = o.layout;
  if (o.megatron_opt->count()) o.req.megatron_args = o.megatron;
  if (o.deepspeed_opt->count()) o.req.deepspeed_config = o.deepspeed;
  // The flag wins; else a launch configuration names its own framework.
  if (o.framework_opt->count() || o.emit_framework) apply_framework(&r.spec, o.framework);
  else if (o.deepspeed_opt->count()) r.spec.training.framework = Framework::kDeepSpeed;  // also Megatron-DeepSpeed
  else if (o.megatron_opt->count()) r.spec.training.framework = Framework::kMegatron;
  if (o.framework_opt->count() || o.emit_framework || o.deepspeed_opt->count() || o.megatron_opt->count())
    r.defaults.erase("framework");
  o.req.ignored_flags = &r.ignored_flags;
  o.req.framework_defaults = &r.framework_defaults;
  r.layout = layout_from_sources(&r.spec, o.in.spec.empty() ? "--layout" : o.in.spec, o.req);
  o.req.ignored_flags = nullptr;
  o.req.framework_defaults = nullptr;
  if (!r.framework_defaults.empty()) r.defaults["framework_defaults"] = r.framework_defaults;
  // A launch configuration may have set what paraplan would have defaulted: then it is no default,
  // even at the default's value (issue 46: --bf16 and train_batch_size were listed as defaults).
  const Training& t = r.spec.training;
  if (t.seq_length_given || (r.defaults.contains("seq_length") && r.defaults["seq_length"] != t.seq_length))
    r.defaults.erase("seq_length");
  if (t.global_batch_size_given ||
      (r.defaults.contains("global_batch_size") && r.defaults["global_batch_size"] != t.global_batch_size))
    r.defaults.erase("global_batch_size");
  if (t.precision_given || (r.defaults.contains("precision") && r.defaults["precision"] != dtype_name(t.precision)))
    r.defaults.erase("precision");
  if (t.optimizer_given) r.defaults.erase("optimizer");
  return r;
}

}  // namespace

int run_cli(int argc, char** argv, std::ostream& out) {
  CLI::App app{"paraplan: which parallel layout to train a transformer with, and whether it fits"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "paraplan 0.1.0");

  LayoutOptions ex;
  bool formulas = false;
  int stage = -1;
  CLI::App* explain = app.add_subcommand(
      "explain", "per-stage memory of one layout, term by term (--formulas shows each formula)");
  add_layout_options(explain, &ex);
  explain->add_flag("--formulas", formulas, "print each term's formula with the numbers put in");
  bool explain_verbose = false;
  explain->add_flag("-v,--verbose", explain_verbose, "list the --megatron-args flags paraplan does not read (stderr)");
  explain->add_option("--stage", stage, "stage whose terms --formulas prints (default: heaviest)")
      ->check(CLI::NonNegativeNumber);
  std::string explain_emit;
  CLI::Option* explain_emit_opt = explain->add_option(
      "--emit", explain_emit,
      "print only the layout's launch settings: megatron (Megatron-LM flags), deepspeed (DeepSpeed JSON), "
      "torchtitan (a Python Trainer.Config function), nanotron (YAML parallelism:); notes on stderr");

  LayoutOptions ck;
  bool verbose = false;
  CLI::App* check = app.add_subcommand(
      "check", "CI gate: exit 0 if the heaviest rank fits within the headroom, 1 if not, 2 on bad input");
  add_layout_options(check, &ck);
  bool strict = false;
  check->add_flag("--strict", strict,
                  "exit 1 also when the layout fits only if PyTorch's caching allocator flushes mid-step (the "
                  "blocks held for the NCCL stream would not fit: see the warning)");
  check->add_flag("-v,--verbose", verbose,
                  "print the verdict line also when the layout fits, and list the --megatron-args flags paraplan "
                  "does not read (stderr)");

  SpecInputs plan_in;
  std::string plan_format = "table", output, plan_framework;
  int top = 10;
  CLI::App* plan = app.add_subcommand(
      "plan", "search every layout and recommend the fastest that fits, with the trade-offs");
  add_spec_options(plan, &plan_in);
  plan->add_option("--top", top, "how many ranked layouts to print (default 10)")->check(CLI::Range(1, 1 << 30));
  plan->add_option("--format", plan_format, "table | json | csv | markdown")
      ->check(CLI::IsMember({"table", "json", "csv", "markdown", "md"}));
  plan->add_option("--output", output, "write the report to FILE instead of stdout");
  std::string plan_emit;
  CLI::Option* plan_emit_opt = plan->add_option(
      "--emit", plan_emit,
      "print only the recommended layout's launch settings: megatron | deepspeed | torchtitan | nanotron "
      "(implies --framework megatron | deepspeed | fsdp | nanotron unless given); notes on stderr");
  CLI::Option* plan_framework_opt = plan->add_option("--framework", plan_framework, kFrameworkHelp);

  std::string models_format = "table", gpus_format = "table";
  std::string models_model;
  CLI::App* models = app.add_subcommand("models", "list the built-in models (--model NAME), or count one model's parameters");
  models->add_option("--format", models_format, "table | json | csv | markdown")
      ->check(CLI::IsMember({"table", "json", "csv", "markdown", "md"}));
  CLI::Option* models_model_opt = models->add_option(
      "--model", models_model,
      "one model (built-in name, model YAML or HuggingFace config.json): its shape and parameter counts, "
      "mixtures of experts included");
  CLI::App* gpus = app.add_subcommand("gpus", "list the built-in GPUs and clusters (--gpu NAME)");
  gpus->add_option("--format", gpus_format, "table | json | csv | markdown")
      ->check(CLI::IsMember({"table", "json", "csv", "markdown", "md"}));

  ValidateOptions vo;
  CLI::App* validate = add_validate_command(app, &vo);
  CalibrateOptions co;
  CLI::App* calibrate = add_calibrate_command(app, &co);

  // A first word that names no subcommand: say so (CLI11 would say "A subcommand is required").
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || sub->check_name(argv[1]);
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "paraplan: error: unknown subcommand '" << SpecError::printable(argv[1], 128) << "'; expected one of: " << names
                << " (see paraplan --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "paraplan: error: " << e.what() << " (see paraplan --help)\n";
    return 2;
  }

  if (explain->parsed()) {
    EmitTarget target{};
    if (explain_emit_opt->count()) {
      target = emit_target(explain_emit);
      if (!ex.framework_opt->count()) ex.framework = framework_name(emit_framework(target)), ex.emit_framework = true;
    }
    Loaded l;
    try {
      l = load(ex);
    } catch (const SpecError& e) {
      // The framework --emit chose refuses the layout: say it is about --emit.
      if (!ex.emit_framework || e.field().rfind("layout", 0) != 0) throw;
      throw SpecError("--emit", 0, "", "cannot express the layout for " + explain_emit + ": " + e.what());
    }
    if (explain_emit_opt->count()) {
      const Emitted e = emit_launch(target, l.spec, l.layout);
      for (const std::string& n : e.notes) std::cerr << "paraplan: note: " << n << "\n";
      out << e.text;
      return 0;
    }
    if (explain_verbose) print_ignored(l);
    const MemoryEstimate e = estimate_memory(l.spec, l.layout);
    if (stage >= l.layout.pp)
      throw SpecError("--stage", 0, "", "expected a stage below pp " + std::to_string(l.layout.pp));
    const StepTime t = estimate_time(l.spec, l.layout);
    if (l.format == Format::kJson) {
      nlohmann::json j = explain_json(l.spec, l.layout, e, ExplainOptions{formulas, stage});
      add_time_json(&j, t, memory_warning_message(e));
      j["defaults"] = l.defaults;
      out << j.dump(2) << "\n";
    } else {
      if (const std::string d = defaults_text(l.defaults); !d.empty())
        out << d << "\n\n";
      out << render_explain(l.format, l.spec, l.layout, e, ExplainOptions{formulas, stage});
      out << (l.format == Format::kMarkdown ? "\n```\n" : "\ntime: ") << time_text(t, l.layout)
          << (l.format == Format::kMarkdown ? "```\n" : "");
    }
    return 0;
  }
  if (check->parsed()) {
    Loaded l = load(ck);
    if (verbose) print_ignored(l);
    const MemoryEstimate e = estimate_memory(l.spec, l.layout);
    const StepTime t = estimate_time(l.spec, l.layout);
    if (l.format == Format::kJson) {
      nlohmann::json j = layout_json(l.spec, l.layout, e);
      add_time_json(&j, t, memory_warning_message(e));
      j["defaults"] = l.defaults;
      out << j.dump(2) << "\n";
    } else if (!e.fits || e.flush_risk || verbose) {
      const char* item = l.format == Format::kMarkdown ? "- " : "";
      if (const std::string d = defaults_text(l.defaults); verbose && !d.empty()) out << item << d << "\n";
      out << item << check_summary(l.spec, l.layout, e)
          << fmt::format("; predicted step {:.3f} s, MFU {:.1f}%", t.step_s, 100 * t.mfu) << "\n";
      if (e.flush_risk) out << item << "warning: " << memory_warning_message(e) << "\n";
    }
    return e.fits && !(strict && e.flush_risk) ? 0 : 1;
  }
  if (plan->parsed()) {
    Format f;
    parse_format(plan_format, &f);
    ResolvedSpec rs = resolve_spec(plan_in);
    Spec& s = rs.spec;
    print_caveats(s.model);
    EmitTarget target{};
    if (plan_emit_opt->count()) target = emit_target(plan_emit);
    if (plan_framework_opt->count()) apply_framework(&s, plan_framework);
    else if (plan_emit_opt->count()) s.training.framework = emit_framework(target);
    if (plan_framework_opt->count() || plan_emit_opt->count()) rs.defaults.erase("framework");
    const Plan p = make_plan(s);
    if (plan_emit_opt->count()) {
      // The fastest fitting layout the framework can run as modelled.
      std::string skipped;
      for (std::int64_t i = 0; i < p.feasible; ++i) {
        const Candidate& c = p.candidates[size_t(i)];
        if (const std::string why = emit_unsupported(target, s, c.layout); !why.empty()) {
          if (skipped.empty()) skipped = to_string(c.layout) + ": " + why;
          continue;
        }
        if (!skipped.empty())
          std::cerr << "paraplan: note: passed over faster layouts that --emit " << plan_emit
                    << " cannot express (the first: " << skipped << ")\n";
        std::cerr << fmt::format("paraplan: note: recommended {}: predicted step {:.3f} s, MFU {:.1f}%{}, {} GiB peak\n",
                                 to_string(c.layout), c.time.step_s, 100 * c.time.mfu,
                                 c.time.clamped() ? fmt::format(" (above the best published {:.1f}%: ranked at {:.3f} s)",
                                                                100 * c.time.best_published_mfu, c.ranked_step_s())
                                                  : std::string(),
                                 gib(c.peak_bytes));
        const Emitted e = emit_launch(target, s, c.layout);
        for (const std::string& n : e.notes) std::cerr << "paraplan: note: " << n << "\n";
        if (output.empty()) out << e.text;
        else write_output(output, e.text);
        return 0;
      }
      std::cerr << "paraplan: no layout fits" << (skipped.empty() ? "" : " that --emit " + plan_emit + " can express")
                << "; run without --emit to see the closest\n";
      return 1;
    }
    const std::string text = render_plan(f, s, p, top, rs.defaults);
    if (output.empty()) out << text;
    else write_output(output, text);
    return 0;
  }
  if (models->parsed() || gpus->parsed()) {
    Format f;
    parse_format(models->parsed() ? models_format : gpus_format, &f);
    if (models->parsed() && models_model_opt->count()) out << render_model(resolve_model(models_model, "--model"), f);
    else out << (models->parsed() ? render_models(f) : render_gpus(f));
    return 0;
  }
  if (validate->parsed()) return run_validate(vo, out);
  if (calibrate->parsed()) return run_calibrate(co, out);
  return 2;
}

}  // namespace paraplan
