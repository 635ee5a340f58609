// `conveyor doctor`: pre-flight for an allocation. Prints every rank (host, local rank, device, stage,
// tensor rank), then measures p2p bandwidth and latency of every pipeline edge and all-reduce bus
// bandwidth of every TP group over the transport the run would use (NCCL on GPUs, MPI on CPUs),
// and flags links far below the best one (e.g. an edge crossing sockets instead of NVLink/IB). On GPUs,
// rank 0 first times the project's kernels on its device (stages/kernel_probe.h): the ceilings that
// `conveyor plan --doctor-json` predicts with.
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "launch/command.h"
#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/dist/device.h"
#include "runtime/dist/link_probe.h"
#include "runtime/dist/mpi_runtime.h"
#include "runtime/dist/process_groups.h"
#include "stages/kernel_probe.h"

namespace po = boost::program_options;

namespace conveyor {

namespace {

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

}  // namespace

int run_doctor_command(const Args& args, int* argc, char*** argv) {
  po::options_description desc("conveyor doctor options");
  desc.add_options()("help,h", "show this help")(
      "bytes", po::value<std::string>()->default_value("256M"), "message size for bandwidth (e.g. 64M, 1G)")(
      "iters", po::value<int>()->default_value(20), "timed iterations per measurement")(
      "slow-ratio", po::value<double>()->default_value(0.5), "flag links below this share of the best")(
      "skip-device", "do not time the kernels on rank 0's GPU (GEMM, attention, graph launch; ~10 s)")(
      "output-json", po::value<std::string>(), "write the measurements as JSON (rank 0)");
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
  if (mpi.rank() == 0 && !vm.count("skip-device")) {
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
  return 0;
}

}  // namespace conveyor
