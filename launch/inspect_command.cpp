// `conveyor inspect <path>`: what a model path holds, before any GPU work: the model spec, every
// tensor with dtype, shape and size, and the tokenizer kind and vocab size when tokenizer metadata
// or files are present. Works for HF directories (tokenizer files optional) and GGUF files.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "launch/command.h"
#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/spec.h"
#include "runtime/model/weights_source.h"
#include "runtime/tokenizer/loading.h"

namespace po = boost::program_options;

namespace conveyor {
namespace {

namespace fs = std::filesystem;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::vector<std::string> parts;
  for (int64_t d : shape) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

// The tokenizer conveyor would run with (load_tokenizer), so inspect shows what generate will use.
std::string tokenizer_text(const std::string& path) {
  ModelSpec spec;
  try {
    spec = load_model_spec(path);
  } catch (const Error&) {
    spec.source = path;  // the spec's own problem is reported under "model spec"
  }
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = load_tokenizer(path, "", spec);
  } catch (const Error& e) {
    return "not loadable: " + e.message();
  }
  if (!tok) return "none found (prompts must be token ids)";
  std::vector<std::string> eos;
  for (int32_t id : tok->eos_ids()) eos.push_back(std::to_string(id));
  return tok->kind() + (fs::is_directory(path) ? " (tokenizer.json)" : " (tokenizer.ggml.*)") + ", vocab " +
         std::to_string(tok->vocab_size()) + ", bos " + std::to_string(tok->bos_id()) + ", eos " +
         (eos.empty() ? std::string("-") : join(eos, ","));
}

void print_spec(const std::string& path) {
  try {
    std::cout << "model spec\n" << load_model_spec(path).summary();
  } catch (const Error& e) {
    // inspect still lists what it can; the reason the spec is refused is the useful part.
    std::cout << "model spec: not loadable: " << e.message() << "\n";
  }
}

void print_tensors(const WeightSource& src) {
  uint64_t total = 0;
  std::cout << "\ntensors (" << src.tensors().size() << ")\n";
  for (const SourceTensor& t : src.tensors()) {
    std::printf("  %-48s %-6s %-18s %s\n", t.name.c_str(), t.dtype.c_str(), shape_text(t.shape).c_str(),
                format_bytes(static_cast<double>(t.nbytes)).c_str());
    total += t.nbytes;
  }
  std::fflush(stdout);
  std::cout << "total " << format_bytes(static_cast<double>(total)) << "\n";
}

}  // namespace

int run_inspect_command(const Args& args) {
  po::options_description desc("conveyor inspect options");
  desc.add_options()("help,h", "show this help")("no-tensors", "omit the tensor list")(
      "path", po::value<std::string>(), "HF model directory or .gguf file");
  po::positional_options_description pos;
  pos.add("path", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  } catch (const po::error& e) {
    CONVEYOR_THROW("conveyor inspect: ", e.what(), "; run `conveyor inspect --help`");
  }
  if (vm.count("help") || !vm.count("path")) {
    std::cout << "usage: conveyor inspect <model dir | file.gguf> [--no-tensors]\n\n" << desc;
    return vm.count("help") ? 0 : 2;
  }
  std::string path = vm["path"].as<std::string>();
  CONVEYOR_CHECK(fs::exists(path), "model path '", path, "' does not exist");
  std::cout << "path: " << path << "\n";
  if (ends_with(path, ".gguf")) {
    GgufFile g(path);
    std::cout << "format: GGUF v" << g.version() << ", " << g.metadata().size() << " metadata keys, alignment "
              << g.alignment() << "\n";
    if (g.has("general.name")) std::cout << "name: " << g.get_string("general.name") << "\n";
    std::cout << "tokenizer: " << tokenizer_text(path) << "\n";
  } else {
    CONVEYOR_CHECK(fs::is_directory(path), "'", path, "' is neither an HF model directory nor a .gguf file");
    std::cout << "format: HF directory\ntokenizer: " << tokenizer_text(path) << "\n";
  }
  print_spec(path);
  if (!vm.count("no-tensors")) print_tensors(*open_weight_source(path));
  return 0;
}

}  // namespace conveyor
