// Cost of the model-identity hash on load: reads every tensor of a checkpoint (whole model, one
// rank: open_share + each tensor converted to fp32, the host side of every backend's load) with and
// without the WeightHasher running beside it, and the hash alone. Passes alternate so both see the
// same page cache; a first pass (reported as first_load_s: cold when the page cache was dropped
// before, `echo 3 > /proc/sys/vm/drop_caches`) warms it. One JSON object on stdout (and --json PATH).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model/spec.h"
#include "runtime/model/weight_hasher.h"
#include "runtime/model/weight_loader.h"

using namespace conveyor;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Every tensor of the whole model read once; returns seconds.
double load_all(const ModelSpec& spec, const std::string& path, bool hash, int threads) {
  double t0 = now_s();
  std::unique_ptr<WeightHasher> hasher;
  if (hash) hasher = std::make_unique<WeightHasher>(path, 0, 1, threads);
  WeightOrigin origin;
  origin.path = path;
  WeightSet set = open_share(spec, WeightShare::whole_model(spec), origin);
  std::vector<float> buf;
  for (const std::string& name : set.names()) {
    buf.resize(static_cast<size_t>(set.header(name).numel()));
    set.fill(name, buf.data());
  }
  if (hasher) assemble_weight_digests(hasher->files(), {hasher->wait()});
  return now_s() - t0;
}

double hash_only(const std::string& path, int threads) {
  double t0 = now_s();
  WeightHasher hasher(path, 0, 1, threads);
  assemble_weight_digests(hasher.files(), {hasher.wait()});
  return now_s() - t0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, json_path;
  int repeat = 3, threads = weight_hash_threads(1);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--model") model = next();
    else if (a == "--json") json_path = next();
    else if (a == "--repeat") repeat = std::stoi(next());
    else if (a == "--threads") threads = std::stoi(next());
    else {
      std::fprintf(stderr, "usage: load_bench --model DIR|FILE.gguf [--repeat N] [--threads T] [--json PATH]\n");
      return 2;
    }
  }
  if (model.empty()) {
    std::fprintf(stderr, "load_bench: --model is required (scripts/make_dummy_checkpoint.py writes one)\n");
    return 2;
  }
  try {
    const ModelSpec spec = load_model_spec(model);
    uint64_t bytes = 0;
    for (const WeightFileInfo& f : list_weight_files(model)) bytes += f.size;
    double first = load_all(spec, model, false, threads);
    std::vector<double> plain, hashed, alone;
    for (int r = 0; r < repeat; ++r) {
      plain.push_back(load_all(spec, model, false, threads));
      hashed.push_back(load_all(spec, model, true, threads));
      alone.push_back(hash_only(model, threads));
    }
    double p = median(plain), h = median(hashed), a = median(alone);
    nlohmann::json j = {{"bench", "load"},       {"model", model},
                        {"bytes", bytes},        {"hash_threads", threads},
                        {"repeat", repeat},      {"load_s", p},
                        {"load_hashed_s", h},    {"hash_only_s", a},
                        {"overhead_pct", 100.0 * (h - p) / p},
                        {"hash_GBps", bytes / a / 1e9},
                        {"load_GBps", bytes / p / 1e9}};
    j["first_load_s"] = first;
    std::printf("%s\n", j.dump().c_str());
    if (!json_path.empty()) std::ofstream(json_path) << nlohmann::json::array({j}).dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
