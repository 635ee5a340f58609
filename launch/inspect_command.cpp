// `conveyor inspect <path>`: what a model path holds, before any GPU work: the model spec, every
// tensor with dtype, shape and size, and the tokenizer kind and vocab size when tokenizer metadata
// or files are present. Works for HF directories (tokenizer files optional) and GGUF files.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "launch/command.h"
#include "runtime/config_cli.h"
#include "runtime/error.h"
#include "runtime/gguf_file.h"
#include "runtime/model_spec.h"
#include "runtime/strings.h"
#include "runtime/weights_source.h"

namespace po = boost::program_options;

namespace conveyor {
namespace {

namespace fs = std::filesystem;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::vector<std::string> parts;
  for (int64_t d : shape) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

// "kind, vocab N" from tokenizer.json (model.type, vocab plus added tokens) or a SentencePiece model.
std::string hf_tokenizer(const std::string& dir) {
  fs::path tj = fs::path(dir) / "tokenizer.json";
  if (!fs::exists(tj)) {
    if (fs::exists(fs::path(dir) / "tokenizer.model")) return "sentencepiece model (tokenizer.model; no tokenizer.json)";
    return "none found";
  }
  nlohmann::json j;
  try {
    std::ifstream in(tj);
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    CONVEYOR_THROW("'", tj.string(), "' is not valid JSON: ", e.what());
  }
  const nlohmann::json& model = j.contains("model") ? j["model"] : nlohmann::json::object();
  std::string type = model.is_object() ? model.value("type", std::string("?")) : "?";
  std::set<int64_t> ids;
  if (model.is_object() && model.contains("vocab")) {
    const auto& v = model["vocab"];
    if (v.is_object())
      for (auto it = v.begin(); it != v.end(); ++it)
        if (it->is_number_integer()) ids.insert(it->get<int64_t>());
    if (v.is_array())
      for (size_t i = 0; i < v.size(); ++i) ids.insert(static_cast<int64_t>(i));
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const auto& t : j["added_tokens"])
      if (t.is_object() && t.contains("id") && t["id"].is_number_integer()) ids.insert(t["id"].get<int64_t>());
  return type + " (tokenizer.json), vocab " + std::to_string(ids.size());
}

std::string gguf_tokenizer(const GgufFile& g) {
  if (!g.has("tokenizer.ggml.model")) return "none found";
  std::string out = g.get_string("tokenizer.ggml.model") + " (tokenizer.ggml.model)";
  if (g.has("tokenizer.ggml.pre")) out += ", pre " + g.get_string("tokenizer.ggml.pre");
  if (const GgufValue* t = g.find("tokenizer.ggml.tokens")) out += ", vocab " + std::to_string(t->array.size());
  return out;
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
    std::cout << "tokenizer: " << gguf_tokenizer(g) << "\n";
  } else {
    CONVEYOR_CHECK(fs::is_directory(path), "'", path, "' is neither an HF model directory nor a .gguf file");
    std::cout << "format: HF directory\ntokenizer: " << hf_tokenizer(path) << "\n";
  }
  print_spec(path);
  if (!vm.count("no-tensors")) print_tensors(*open_weight_source(path));
  return 0;
}

}  // namespace conveyor
