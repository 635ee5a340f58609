// The batch job of `conveyor generate --input` without a model: a fake Generator answers every
// request, so opening (invalid lines to the error file, --strict), running (results, per-request
// and engine failures, chat requests without a template or tokenizer), resuming (done ids skipped)
// and the stats behind --summary are checked line by line, as the CLI scripts see them end to end.
#include "launch/batch_job.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "launch/chat_prompt.h"
#include "runtime/core/error.h"
#include "runtime/model/gguf_file.h"
#include "runtime/tokenizer/loading.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using nlohmann::json;

// Answers each request in one step: the prompt reversed as token ids, "length"; a prompt that starts
// with kFailId comes back as an engine failure. Text prompts encode as their bytes.
class FakeGenerator : public Generator {
 public:
  static constexpr int32_t kFailId = 999;
  void add_request(Request r) override {
    seen.insert(r.label);
    prompts.push_back(r.prompt_ids);
    pending_.push_back(std::move(r));
  }
  std::vector<CompletionOutput> step() override {
    std::vector<CompletionOutput> outs;
    for (const Request& r : pending_) {
      CompletionOutput o;
      o.request_id = r.id;
      o.prompt_tokens = static_cast<int64_t>(r.prompt_ids.size());
      if (r.prompt_ids.front() == kFailId) {
        o.finish_reason = FinishReason::kError;
        o.error = "refused by the fake engine";
      } else {
        o.token_ids.assign(r.prompt_ids.rbegin(), r.prompt_ids.rend());
        o.text = "out" + std::to_string(r.prompt_ids.size());
        o.finish_reason = FinishReason::kLength;
        o.completion_tokens = static_cast<int64_t>(o.token_ids.size());
        o.ttft_s = 0.01 * static_cast<double>(r.id + 1);
        o.tpot_s = 0.001;
      }
      outs.push_back(std::move(o));
    }
    pending_.clear();
    return outs;
  }
  bool has_unfinished() const override { return !pending_.empty(); }
  const Tokenizer* tokenizer() const override { return tok; }
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  int64_t preemptions() const override { return 3; }
  int64_t generated_tokens() const override { return 0; }
  void shutdown() override {}

  std::set<std::string> seen;  // labels of the requests added
  std::vector<std::vector<int32_t>> prompts;  // prompt ids of the requests added, in order
  const Tokenizer* tok = nullptr;

 private:
  std::vector<Request> pending_;
};

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

struct Job {
  std::string dir, input, output;
  BatchJobOptions options() const {
    BatchJobOptions o;
    o.input = input;
    o.output = output;
    o.model = "fake-model";
    o.served_model_names = {"fake-model", "m2"};
    return o;
  }
};

// Lines: 1 and 2 completions (text, ids), 3 malformed JSON, 4 a chat request, 5 an engine failure,
// 6 an OpenAI Batch line, then random id prompts.
Job make_job(const std::string& name, int random_lines) {
  Job j;
  j.dir = testing::temp_dir(name);
  j.input = j.dir + "/requests.jsonl";
  j.output = j.dir + "/results.jsonl";
  std::ofstream in(j.input);
  in << json({{"prompt", "hello"}}).dump() << "\n";
  in << json({{"prompt", {5, 6, 7}}, {"max_tokens", 3}}).dump() << "\n";
  in << "{\"prompt\": \n";
  in << json({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}).dump() << "\n";
  in << json({{"prompt", {FakeGenerator::kFailId, 1}}}).dump() << "\n";
  in << json({{"custom_id", "openai-1"}, {"method", "POST"}, {"url", "/v1/completions"},
              {"body", {{"model", "m2"}, {"prompt", {8, 9}}}}}).dump() << "\n";
  std::mt19937 rng(17);
  for (int i = 0; i < random_lines; ++i) {
    std::vector<int32_t> ids(1 + rng() % 6);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 500);
    in << json({{"prompt", ids}}).dump() << "\n";
  }
  return j;
}

TEST(BatchJob, WritesResultsAndErrorLinesAndCountsThem) {
  const Job j = make_job("batch_job_run", 10);
  BatchJob job(Config(), j.options());
  FakeGenerator gen;
  ASSERT_EQ(job.run(gen), 0);
  const std::vector<json> results = read_lines(j.output);
  ASSERT_EQ(results.size(), 13u);  // lines 1, 2, 6 and the 10 random ones
  std::map<std::string, json> by_id;
  for (const json& r : results) by_id[r["custom_id"]] = r;
  const json& first = by_id.at("line-1")["response"]["body"];
  EXPECT_EQ(first["choices"][0]["text"], "out5");
  EXPECT_EQ(first["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(first["choices"][0]["token_ids"], json({'o', 'l', 'l', 'e', 'h'}));
  EXPECT_EQ(first["model"], "fake-model");
  EXPECT_EQ(by_id.at("line-2")["response"]["body"]["choices"][0]["token_ids"], json({7, 6, 5}));
  EXPECT_EQ(by_id.at("openai-1")["response"]["body"]["model"], "m2");
  EXPECT_EQ(by_id.count("line-3") + by_id.count("line-4") + by_id.count("line-5"), 0u);

  std::map<int64_t, std::string> errors;
  for (const json& e : read_lines(j.output + ".errors.jsonl"))
    errors[e["line"].get<int64_t>()] = e["response"]["body"]["error"]["message"];
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors.at(4).find("no chat template"), std::string::npos) << errors.at(4);
  EXPECT_NE(errors.at(5).find("refused by the fake engine"), std::string::npos) << errors.at(5);
  EXPECT_TRUE(errors.count(3));

  const BatchJobStats& s = job.stats();
  EXPECT_EQ(s.total, 15);  // valid lines; the malformed one is an invalid line
  EXPECT_EQ(s.invalid_lines, 1);
  EXPECT_EQ(s.done, 15);
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.resumed, 0);
  EXPECT_EQ(s.preemptions, 3);
  EXPECT_FALSE(s.interrupted);
  int64_t prompt = 0;
  for (const json& r : results) prompt += r["response"]["body"]["usage"]["prompt_tokens"].get<int64_t>();
  EXPECT_EQ(s.prompt_tokens, prompt);
  EXPECT_EQ(s.output_tokens, prompt);  // the fake answers with the prompt reversed
  EXPECT_EQ(s.ttft_s.size(), 13u);
  const json summary = batch_summary_json(s, nullptr);
  EXPECT_EQ(summary["completed"], 13);
  EXPECT_EQ(summary["failed"], 2);
  EXPECT_EQ(summary["ttft_s"]["count"], 13);
}

// A model the job does not serve fails its line as vLLM answers it; the error keeps the custom_id. An
// empty input runs nothing and still succeeds.
TEST(BatchJob, UnknownModelIsAnErrorLineAndAnEmptyInputRunsNothing) {
  Job j = make_job("batch_job_model", 0);
  std::ofstream(j.input) << json({{"custom_id", "g"}, {"method", "POST"}, {"url", "/v1/completions"},
                                  {"body", {{"model", "gpt-9"}, {"prompt", {8, 9}}}}}).dump() << "\n"
                         << json({{"model", "m2"}, {"prompt", {3}}}).dump() << "\n";
  {
    BatchJob job(Config(), j.options());
    FakeGenerator gen;
    ASSERT_EQ(job.run(gen), 0);
    const std::vector<json> errors = read_lines(j.output + ".errors.jsonl");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0]["custom_id"], "g");
    EXPECT_EQ(errors[0]["response"]["body"]["error"]["message"].get<std::string>().rfind(
                  "The model `gpt-9` does not exist.", 0), 0u) << errors[0];
    EXPECT_EQ(read_lines(j.output).at(0)["response"]["body"]["model"], "m2");
  }
  Job empty = make_job("batch_job_empty", 0);
  std::ofstream(empty.input).close();
  BatchJob job(Config(), empty.options());
  FakeGenerator gen;
  EXPECT_EQ(job.run(gen), 0);
  EXPECT_EQ(job.stats().total, 0);
}

// A rerun skips every request the output already answers, with a result or an error line alike (the
// writer's done ids); only the malformed line, which has no id, is reported again.
TEST(BatchJob, RerunSkipsEveryAnsweredRequest) {
  const Job j = make_job("batch_job_resume", 6);
  {
    BatchJob job(Config(), j.options());
    FakeGenerator gen;
    ASSERT_EQ(job.run(gen), 0);
  }
  BatchJob again(Config(), j.options());
  FakeGenerator gen;
  ASSERT_EQ(again.run(gen), 0);
  EXPECT_EQ(again.stats().resumed, 11);  // lines 1, 2, 4, 5, 6 and the 6 random ones
  EXPECT_TRUE(gen.seen.empty());
  EXPECT_EQ(again.stats().failed, 0);
  EXPECT_EQ(again.stats().invalid_lines, 1);
  EXPECT_EQ(read_lines(j.output).size(), 9u);  // nothing written twice
  EXPECT_EQ(read_lines(j.output + ".errors.jsonl").size(), 3u);
}

TEST(BatchJob, ChatWithATemplateButNoTokenizerIsAnErrorLine) {
  const Job j = make_job("batch_job_chat", 0);
  BatchJobOptions o = j.options();
  o.chat_template_name = "chatml";
  BatchJob job(Config(), o);
  FakeGenerator gen;
  ASSERT_EQ(job.run(gen), 0);
  bool found = false;
  for (const json& e : read_lines(j.output + ".errors.jsonl")) {
    if (e["line"] != 4) continue;
    found = true;
    EXPECT_NE(e["response"]["body"]["error"]["message"].get<std::string>().find("no tokenizer"), std::string::npos);
  }
  EXPECT_TRUE(found);
}

// --chat and a batch chat request give the same prompt ids for the same messages, on every template
// family the tokenizer layer renders (tests/data/chat_template), with the model's default system prompt;
// where the family's tokens are SmolLM2's, both equal transformers' rendering encoded.
TEST(BatchJob, ChatPromptIdsEqualThoseOfGenerateChatOnEveryTemplate) {
  const std::string gguf = testing::test_model_path();
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(gguf, "", load_model_spec(gguf));
  ASSERT_TRUE(tok);
  std::ifstream expected(testing::data_path("chat_template/expected.jsonl"));
  std::string text;
  std::set<std::string> families;
  int checked = 0;
  while (std::getline(expected, text)) {
    const json f = json::parse(text);
    const std::string jinja = f["chat_template"].is_null() ? GgufFile(gguf).get_string("tokenizer.chat_template")
                                                           : f["chat_template"].get<std::string>();
    for (const json& c : f["cases"]) {
      const json& m = c["messages"];
      const bool single = m.size() == 1 && m[0]["role"] == "user";
      const bool with_system = m.size() == 2 && m[0]["role"] == "system" && m[1]["role"] == "user";
      if (!c["add_generation_prompt"].get<bool>() || !(single || with_system)) continue;
      SCOPED_TRACE(f["source"].get<std::string>() + " " + m.dump());
      std::optional<std::string> system;
      if (with_system) system = m[0]["content"].get<std::string>();
      const std::vector<int32_t> chat = single_turn_chat_ids("", jinja, tok.get(), system, m.back()["content"]);

      Job j = make_job("batch_job_chat_ids_" + std::to_string(checked), 0);
      std::ofstream(j.input) << json({{"messages", m}}).dump() << "\n";
      BatchJobOptions o = j.options();
      o.model_chat_template = jinja;
      BatchJob job(Config(), o);
      FakeGenerator gen;
      gen.tok = tok.get();
      ASSERT_EQ(job.run(gen), 0);
      ASSERT_EQ(gen.prompts.size(), 1u);
      EXPECT_EQ(gen.prompts[0], chat);
      if (f["bos"] == tok->id_to_token(tok->bos_id())) {
        EXPECT_EQ(chat, tok->encode(c["expected"].get<std::string>(), /*add_bos=*/false, /*parse_special=*/true));
      }
      families.insert(f["source"].get<std::string>());
      ++checked;
    }
  }
  EXPECT_EQ(families.size(), 4u);  // SmolLM2's own ChatML (with its default system prompt), Qwen2, Llama-3, Llama-2
  EXPECT_GE(checked, 8);
  // SmolLM2's template adds its system prompt when the conversation has none; --chat keeps it.
  const std::string smol = tok->decode(single_turn_chat_ids("", GgufFile(gguf).get_string("tokenizer.chat_template"),
                                                            tok.get(), std::nullopt, "hi"), false);
  EXPECT_NE(smol.find("<|im_start|>system\n"), std::string::npos) << smol;
}

TEST(BatchJob, OpeningRefusesStrictInputWithInvalidLinesAndAMissingOutput) {
  const Job j = make_job("batch_job_open", 0);
  BatchJobOptions strict = j.options();
  strict.strict = true;
  EXPECT_THROW(BatchJob(Config(), strict), Error);
  BatchJobOptions no_output = j.options();
  no_output.output.clear();
  try {
    BatchJob job(Config(), no_output);
    ADD_FAILURE() << "a job without --output opened";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("--output"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace conveyor
