// Tests of the batch output side: SHA-256 against FIPS 180-4 vectors, UTF-8 repair, record shapes,
// and the writer's resume behaviour (done ids, torn last line, corruption, manifest refusals).
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

TEST(Sha256, MatchesFipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, ChunkedUpdatesEqualOneShot) {
  std::mt19937 rng(3);
  std::string data(10007, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  std::string want = sha256_hex(data);
  for (size_t chunk : {1u, 63u, 64u, 65u, 1000u}) {
    Sha256 h;
    for (size_t i = 0; i < data.size(); i += chunk) h.update(data.substr(i, chunk));
    EXPECT_EQ(h.hex_digest(), want) << "chunk " << chunk;
  }
  std::string path = testing::temp_dir("sha256") + "/f.bin";
  std::ofstream(path, std::ios::binary) << data;
  EXPECT_EQ(sha256_file(path), want);
}

TEST(SanitizeUtf8, ReplacesMaximalInvalidSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(sanitize_utf8("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x99\x82"), "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x99\x82");
  EXPECT_EQ(sanitize_utf8("ab\xE6\x97"), "ab" + r);          // cut inside a 3-byte character
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x99"), r);               // cut inside a 4-byte character
  EXPECT_EQ(sanitize_utf8("\xF0\x80x"), r + r + "x");         // F0 80 can never start a valid sequence
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), r + r + r);       // a surrogate
  EXPECT_EQ(sanitize_utf8("\xC0\xAF\xFF"), r + r + r);       // overlong and never-valid bytes
}

TEST(SanitizeUtf8, RandomBytesAlwaysDumpAsJson) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    std::string clean = sanitize_utf8(s);
    std::string dumped;
    ASSERT_NO_THROW(dumped = json(clean).dump()) << "trial " << trial;
    EXPECT_EQ(json::parse(dumped).get<std::string>(), clean);
    EXPECT_EQ(sanitize_utf8(clean), clean);  // idempotent: valid text is left alone
  }
}

BatchResult sample_result(const std::string& id, Endpoint e) {
  BatchResult r;
  r.custom_id = id;
  r.endpoint = e;
  r.model = "smollm2";
  r.text = "hello \xE6\x97";  // ends inside a character
  r.token_ids = {17, 4242, 99};
  r.finish_reason = "length";
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

}  // namespace
}  // namespace conveyor
