// Tests of the batch output side: record shapes (text that is not valid UTF-8 included) and the
// writer's resume behaviour (done ids, torn last line, corruption, manifest refusals, duplicated ids).
#include "runtime/batch/output.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "runtime/core/error.h"
#include "runtime/core/sha256.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using nlohmann::json;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

BatchResult sample_result(const std::string& id, Endpoint e) {
  BatchResult r;
  r.custom_id = id;
  r.endpoint = e;
  r.model = "smollm2";
  r.text = "hello \xE6\x97";  // ends inside a character
  r.token_ids = {17, 4242, 99};
  r.finish_reason = FinishReason::kLength;
  r.prompt_tokens = 5;
  r.created = 1700000000;
  return r;
}

TEST(BatchRecords, ResultAndErrorShapes) {
  json c = make_result_record(sample_result("a", Endpoint::kCompletions), "req_1");
  EXPECT_EQ(c["id"].get<std::string>().rfind("batch_req_", 0), 0u);
  EXPECT_EQ(c["custom_id"], "a");
  EXPECT_TRUE(c["error"].is_null());
  EXPECT_EQ(c["response"]["status_code"], 200);
  EXPECT_EQ(c["response"]["request_id"], "req_1");
  const json& body = c["response"]["body"];
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["created"], 1700000000);
  EXPECT_EQ(body["model"], "smollm2");
  EXPECT_EQ(body["choices"][0]["text"], "hello \xEF\xBF\xBD");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["choices"][0]["token_ids"], json({17, 4242, 99}));
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 5}, {"completion_tokens", 3}, {"total_tokens", 8}}));

  json chat = make_result_record(sample_result("b", Endpoint::kChatCompletions), "req_2");
  EXPECT_EQ(chat["response"]["body"]["object"], "chat.completion");
  EXPECT_EQ(chat["response"]["body"]["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(chat["response"]["body"]["choices"][0]["message"],
            json({{"role", "assistant"}, {"content", "hello \xEF\xBF\xBD"}}));

  json e = make_error_record(std::nullopt, 12, 400, "malformed JSON", "req_3");
  EXPECT_TRUE(e["custom_id"].is_null());
  EXPECT_EQ(e["line"], 12);
  EXPECT_EQ(e["response"]["status_code"], 400);
  EXPECT_EQ(e["response"]["body"]["error"]["message"], "malformed JSON");
  EXPECT_EQ(e["response"]["body"]["error"]["type"], "invalid_request_error");
  EXPECT_NE(random_id("x"), random_id("x"));
}

struct Job {
  std::string dir, input, output;
  BatchOutputOptions options(const std::string& model = "m") const {
    BatchOutputOptions o;
    o.output_path = output;
    o.fsync_interval = 0;
    o.manifest = make_manifest(input, model, json{{"temperature", 0.0}});
    return o;
  }
};

Job make_job(const std::string& name) {
  Job j;
  j.dir = testing::temp_dir(name);
  j.input = j.dir + "/in.jsonl";
  j.output = j.dir + "/out.jsonl";
  std::ofstream(j.input) << R"({"prompt": "a"})" << "\n";
  return j;
}

TEST(BatchOutputWriter, WritesAndResumesDoneIds) {
  Job job = make_job("writer_resume");
  {
    BatchOutputWriter w(job.options());
    EXPECT_TRUE(w.done_ids().empty());
    w.write_result(sample_result("a", Endpoint::kCompletions));
    w.write_result(sample_result("b", Endpoint::kChatCompletions));
    w.write_error(std::string("c"), 3, "temperature must be non-negative");
    w.write_error(std::nullopt, 4, "malformed JSON");
    w.close();
    EXPECT_EQ(w.results_written(), 2);
  }
  EXPECT_EQ(read_lines(job.output).size(), 2u);
  EXPECT_EQ(read_lines(job.output + ".errors.jsonl").size(), 2u);
  json manifest = json::parse(read_all(job.output + ".manifest.json"));
  EXPECT_EQ(manifest["input_sha256"], sha256_file(job.input));
  EXPECT_EQ(manifest["model"], "m");
  EXPECT_EQ(manifest["conveyor_version"], CONVEYOR_VERSION);
  BatchOutputWriter w(job.options());
  EXPECT_EQ(w.resumed_results(), 2);
  EXPECT_TRUE(w.is_done("a"));
  EXPECT_TRUE(w.is_done("b"));
  EXPECT_TRUE(w.is_done("c"));  // failed requests are not retried
  EXPECT_FALSE(w.is_done("d"));
  w.write_error(std::string("c"), 3, "temperature must be non-negative");  // same line again: not repeated
  w.write_error(std::nullopt, 4, "malformed JSON");
  w.write_result(sample_result("d", Endpoint::kCompletions));
  w.close();
  EXPECT_EQ(read_lines(job.output + ".errors.jsonl").size(), 2u);
  EXPECT_EQ(read_lines(job.output).size(), 3u);
}

TEST(BatchOutputWriter, DropsTornLastLine) {
  Job job = make_job("writer_torn");
  {
    BatchOutputWriter w(job.options());
    w.write_result(sample_result("a", Endpoint::kCompletions));
  }
  std::string good = read_all(job.output);
  std::string next = make_result_record(sample_result("b", Endpoint::kCompletions), "r").dump() + "\n";
  for (size_t cut : {size_t{1}, next.size() / 2, next.size() - 1}) {  // killed at several points of a write
    std::ofstream(job.output, std::ios::binary) << good << next.substr(0, cut);
    BatchOutputWriter w(job.options());
    EXPECT_EQ(w.dropped_torn_bytes(), static_cast<int64_t>(cut));
    EXPECT_TRUE(w.is_done("a"));
    EXPECT_FALSE(w.is_done("b"));
    w.close();
    EXPECT_EQ(read_all(job.output), good);
  }
  // A complete line that is not JSON at the very end (e.g. zero-filled after a crash) is dropped too.
  std::ofstream(job.output, std::ios::binary) << good << std::string(10, '\0') << "\n";
  BatchOutputWriter w(job.options());
  w.close();
  EXPECT_EQ(read_all(job.output), good);
}

TEST(BatchOutputWriter, RefusesCorruptionInTheMiddle) {
  Job job = make_job("writer_corrupt");
  { BatchOutputWriter w(job.options()); }
  std::string line = make_result_record(sample_result("a", Endpoint::kCompletions), "r").dump();
  std::ofstream(job.output) << line << "\n{broken\n" << line << "\n";
  try {
    BatchOutputWriter w(job.options());
    FAIL() << "a corrupt middle line was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("line 2"), std::string::npos) << e.message();
  }
}

TEST(BatchOutputWriter, RefusesAnotherJobsOutput) {
  Job job = make_job("writer_manifest");
  { BatchOutputWriter w(job.options()); w.write_result(sample_result("a", Endpoint::kCompletions)); }
  std::ofstream(job.input, std::ios::app) << R"({"prompt": "b"})" << "\n";
  try {
    BatchOutputWriter w(job.options());
    FAIL() << "resumed with a changed input";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("the input differs"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("refusing to resume"), std::string::npos) << e.message();
  }
  Job job2 = make_job("writer_manifest_model");
  { BatchOutputWriter w(job2.options("model-a")); }
  try {
    BatchOutputWriter w(job2.options("model-b"));
    FAIL() << "resumed with a different model";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("now 'model-b', earlier 'model-a'"), std::string::npos) << e.message();
  }
  Job job3 = make_job("writer_no_manifest");
  std::ofstream(job3.output) << "{}\n";
  EXPECT_THROW(BatchOutputWriter w(job3.options()), Error);
}

TEST(BatchOutputWriter, RefusesDuplicatedCustomIds) {
  Job job = make_job("writer_duplicates");
  {
    BatchOutputWriter w(job.options());
    for (const char* id : {"a", "b", "c"}) w.write_result(sample_result(id, Endpoint::kCompletions));
  }
  std::string once = read_all(job.output);
  std::string line_b = make_result_record(sample_result("b", Endpoint::kCompletions), "r").dump() + "\n";
  std::string line_c = make_result_record(sample_result("c", Endpoint::kCompletions), "r").dump() + "\n";
  std::ofstream(job.output, std::ios::binary) << once << line_b << line_c;  // two jobs wrote it at once
  try {
    BatchOutputWriter w(job.options());
    FAIL() << "resumed over an output holding custom_ids twice";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(job.output), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("2 custom_id(s) appear more than once"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("the first is 'b'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("new --output"), std::string::npos) << e.message();
  }
  EXPECT_EQ(read_all(job.output), once + line_b + line_c);  // left as it was
}

}  // namespace
}  // namespace conveyor
