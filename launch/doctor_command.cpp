// `conveyor doctor`: pre-flight for an allocation. Prints every rank (host, local rank, device, stage,
// tensor rank), then measures p2p bandwidth and latency of every pipeline edge and all-reduce bus
// bandwidth of every TP group over the transport the run would use (NCCL on GPUs, MPI on CPUs),
// and flags links far below the best one (e.g. an edge crossing sockets instead of NVLink/IB). On GPUs,
// rank 0 first times the project's kernels on its device (stages/kernel_probe.h): the ceilings that
// `conveyor plan --doctor-json` predicts with. With --model M it last scores the built-in text
// (runtime/eval/builtin_text.h) with M on the same layout and fails when the perplexity is absurd.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "launch/command.h"
#include "launch/perplexity_command.h"
#include "launch/pipeline_session.h"
#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/dist/device.h"
#include "runtime/dist/link_probe.h"
#include "runtime/dist/mpi_runtime.h"
#include "runtime/dist/process_groups.h"
#include "runtime/eval/builtin_text.h"
#include "stages/cpu_probe.h"
#include "stages/kernel_probe.h"

namespace po = boost::program_options;

namespace conveyor {

namespace {

constexpr int kDoctorCtx = 256;
// A healthy model of >= 100M parameters scores 5-30 on plain English prose; a uniform guess over
// the vocabulary scores the vocabulary size (32k-152k). Corrupt weights land in the thousands.
constexpr double kDoctorMaxPpl = 1000.0;

// Doctor's layout defaults to one pipeline across all ranks unless the user gave one.
Layout doctor_layout(Config* cfg, int world_size) {
  if (cfg->value("parallel.pipeline").origin == "default") {
    int64_t rest = cfg->get_int("parallel.data") * cfg->get_int("parallel.tensor");
    if (rest > 0 && world_size % rest == 0) cfg->set("parallel.pipeline", std::to_string(world_size / rest), "doctor default");
  }
  cfg->check_world_size(world_size);
  return Layout{static_cast<int>(cfg->get_int("parallel.data")), static_cast<int>(cfg->get_int("parallel.pipeline")),
                static_cast<int>(cfg->get_int("parallel.tensor"))};
}

// --model: a short perplexity (two chunks of 256 tokens of the built-in text) on the doctor's
// layout, over the doctor's MPI world. Returns 0 when the value is finite and at most max_ppl,
// else 3 (after saying why), on every rank.
int check_model(const Config& cfg, MpiRuntime& mpi, double max_ppl) {
  const std::string path = cfg.get_string("model.path");
  const ModelSpec spec = load_model_spec(path);
  PerplexityOptions opt;
  opt.ctx = kDoctorCtx;
  opt.model = path;
  PipelineSession session(cfg, mpi);
  session.start(cfg, spec);
  std::optional<PerplexityReport> rep;
  try {
    rep = perplexity_on_session(cfg, session, spec, builtin_perplexity_text(), opt);
  } catch (const Error& e) {
    // One rank alone can report a broken forward pass (non-finite logits) as a verdict; with peers
    // waiting on it the error must end the job through main's abort.
    if (mpi.size() > 1) throw;
    std::cout << "model check: FAILED: " << e.message() << "\n";
    return 3;
  }
  long long bad = 0;
  if (mpi.rank() == 0) {
    const double ppl = rep->nll.ppl();
    bad = !std::isfinite(ppl) || ppl > max_ppl;
    std::printf("model check: PPL = %.4f +/- %.4f on the built-in text (%lld tokens, %lld chunks of %d): %s\n", ppl,
                rep->nll.ppl_error(), static_cast<long long>(rep->n_tokens),
                static_cast<long long>(rep->chunking.n_chunks), rep->chunking.ctx,
                bad ? "FAILED (above --max-ppl; corrupt weights or a wrong format/dtype?)" : "ok");
    std::fflush(stdout);
  }
  return mpi.all_max(bad) ? 3 : 0;
}

}  // namespace

int run_doctor_command(const Args& args, int* argc, char*** argv) {
  po::options_description desc("conveyor doctor options");
  desc.add_options()("help,h", "show this help")(
      "bytes", po::value<std::string>()->default_value("256M"), "message size for bandwidth (e.g. 64M, 1G)")(
      "iters", po::value<int>()->default_value(20), "timed iterations per measurement")(
      "slow-ratio", po::value<double>()->default_value(0.5), "flag links below this share of the best")(
      "skip-device", "do not time the kernels on rank 0's GPU (GEMM, attention, graph launch; ~10 s)")(
      "output-json", po::value<std::string>(), "write the measurements as JSON (rank 0)")(
      "max-ppl", po::value<double>()->default_value(kDoctorMaxPpl),
      "with --model: the highest perplexity on the built-in text that passes (docs/perplexity.md)");
  add_config_options(&desc);
  po::variables_map vm = parse_command_line(args, desc);
  if (vm.count("help")) {
    std::cout << "usage: mpirun -np N conveyor doctor [-pp P] [-tp T] [-dp D] [options]\n\n" << desc;
    return 0;
  }
  Config cfg = config_from_options(vm);  // validate before MPI/GPU work

  MpiRuntime mpi(argc, argv);
  init_logging(mpi.rank(), cfg.get_string("logging.level"));
  WorldConfig world(doctor_layout(&cfg, mpi.size()), mpi.rank());
  Backend backend = resolve_backend(cfg.get_string("runtime.backend"));
  std::unique_ptr<Device> device = make_device(backend, mpi.local_rank());

  DoctorOptions opt;
  opt.bytes = parse_byte_size(vm["bytes"].as<std::string>());
  opt.iters = vm["iters"].as<int>();
  opt.slow_ratio = vm["slow-ratio"].as<double>();
  CONVEYOR_CHECK(opt.iters >= 1, "--iters must be >= 1, got ", opt.iters);

  std::string table = rank_table(world, mpi, *device);
  if (mpi.rank() == 0) std::cout << table << std::flush;

  // Rank 0 alone, before the links, so nothing else runs on its GPU; the others wait in the first barrier.
  nlohmann::json device_section;
  if (backend == Backend::kCpu && !vm.count("skip-device")) {
    // The threads a run of this config takes (bench, generate): the ceilings are per rank with them.
    const int threads = set_cpu_threads(cfg, mpi, backend);
    device_section = measure_cpu_host(MPI_COMM_WORLD);  // collective: rank 0 alone, then the sharing
    if (mpi.rank() == 0) device_section["threads"] = threads;
    if (mpi.rank() == 0) std::cout << format_cpu_device(device_section) << std::flush;
  } else if (mpi.rank() == 0 && !vm.count("skip-device")) {
    device_section = measure_device(*device);
    std::cout << format_device(device_section) << std::flush;
  }

  auto groups = make_process_groups(world, backend, parse_data_transport(cfg.get_string("parallel.data_transport")));
  DoctorReport report = measure_links(world, *groups, *device, opt);
  if (mpi.rank() == 0) {
    std::cout << format_report(report, opt) << std::flush;
    if (vm.count("output-json")) {
      std::ofstream out(vm["output-json"].as<std::string>());
      CONVEYOR_CHECK(out.good(), "cannot write ", vm["output-json"].as<std::string>());
      nlohmann::json j = report_json(report, world, backend);
      if (!device_section.is_null()) j["device"] = device_section;
      out << j.dump(2) << "\n";
    }
  }
  groups.reset();
  if (cfg.get_string("model.path").empty()) return 0;
  return check_model(cfg, mpi, vm["max-ppl"].as<double>());
}

}  // namespace conveyor
