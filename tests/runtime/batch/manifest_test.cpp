// The manifest's model identity: files compared by size at open and by digest after the load, never
// by path string; a changed size or content is refused naming the file, another path to the same
// file resumes, a manifest from before files were recorded resumes and gets them recorded.
#include "runtime/batch/manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/batch/output.h"
#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using nlohmann::json;

struct Job {
  std::string dir, input, output;
  BatchOutputOptions options(std::vector<WeightFileInfo> files, const std::string& model = "/m/model.gguf") const {
    BatchOutputOptions o;
    o.output_path = output;
    o.fsync_interval = 0;
    o.manifest = make_manifest(input, model, json{{"temperature", "0"}}, std::move(files));
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

BatchResult result(const std::string& id) {
  BatchResult r;
  r.custom_id = id;
  r.text = "t";
  r.token_ids = {1, 2};
  return r;
}

std::string refusal(const Job& job, const std::vector<WeightFileInfo>& at_open, const std::vector<WeightFileInfo>& hashed) {
  try {
    BatchOutputWriter w(job.options(at_open));
    w.confirm_model_files(hashed);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

const std::vector<WeightFileInfo> kSized = {{"/m/a.safetensors", 100, ""}, {"/m/b.safetensors", 50, ""}};
const std::vector<WeightFileInfo> kHashed = {{"/m/a.safetensors", 100, "0123456789abcdef0123456789abcdef"},
                                             {"/m/b.safetensors", 50, "fedcba9876543210fedcba9876543210"}};

TEST(BatchManifest, RoundTripsModelFiles) {
  Job job = make_job("manifest_roundtrip");
  BatchManifest m = job.options(kHashed).manifest;
  BatchManifest back = BatchManifest::from_json(json::parse(m.to_json().dump()), "x");
  ASSERT_TRUE(back.has_model_files);
  ASSERT_EQ(back.model_files.size(), 2u);
  EXPECT_EQ(back.model_files[1].path, "/m/b.safetensors");
  EXPECT_EQ(back.model_files[1].size, 50u);
  EXPECT_EQ(back.model_files[1].digest, kHashed[1].digest);
  EXPECT_TRUE(back.has_digests());
  EXPECT_TRUE(back.differences(m).empty());
}

TEST(BatchManifest, RecordsDigestsAfterTheLoadAndRefusesOtherContent) {
  Job job = make_job("manifest_content");
  {
    BatchOutputWriter w(job.options(kSized));
    w.write_result(result("a"));
    w.confirm_model_files(kHashed);
  }
  EXPECT_TRUE(read_manifest(manifest_path_for(job.output))->has_digests());
  // Same size, other content: refused after the load naming the file and both digests.
  auto flipped = kHashed;
  flipped[1].digest = "00000000000000000000000000000000";
  std::string msg = refusal(job, kSized, flipped);
  EXPECT_NE(msg.find("the model file '/m/b.safetensors' differs from the earlier run's '/m/b.safetensors': same size "
                     "(50 bytes) but other content (xxh3-128/16MiB 00000000000000000000000000000000, earlier "
                     "fedcba9876543210fedcba9876543210)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("a.safetensors"), std::string::npos) << "names an unchanged file: " << msg;
  // The same files by another path string (a symlink, a relative path): resumes.
  auto moved = kHashed;
  for (auto& f : moved) f.path = "/elsewhere/" + std::filesystem::path(f.path).filename().string();
  auto moved_sized = moved;
  for (auto& f : moved_sized) f.digest.clear();
  EXPECT_EQ(refusal(job, moved_sized, moved), "");
  EXPECT_TRUE(read_manifest(manifest_path_for(job.output))->has_digests());
}

TEST(BatchManifest, RefusesAnotherSizeOrFileCountAtOpen) {
  Job job = make_job("manifest_size");
  { BatchOutputWriter w(job.options(kSized)); }
  auto bigger = kSized;
  bigger[0].size = 101;
  std::string msg = refusal(job, bigger, {});
  EXPECT_NE(msg.find("the model file '/m/a.safetensors' differs from the earlier run's '/m/a.safetensors': its size is "
                     "101 bytes, earlier 100 bytes"),
            std::string::npos)
      << msg;
  msg = refusal(job, {kSized[0]}, {});
  EXPECT_NE(msg.find("has 1 weight file(s), the earlier run's '/m/model.gguf' had 2"), std::string::npos) << msg;
}

TEST(BatchManifest, OldManifestWithoutFilesResumesAndGetsThem) {
  Job job = make_job("manifest_old");
  {
    BatchOutputWriter w(job.options(kSized));
    w.write_result(result("a"));
  }
  // What an older conveyor wrote: no model_files.
  std::string path = manifest_path_for(job.output);
  json j = json::parse(std::ifstream(path));
  j.erase("model_files");
  std::ofstream(path) << j.dump(2);
  EXPECT_EQ(refusal(job, kSized, kHashed), "");
  EXPECT_TRUE(read_manifest(path)->has_digests());
  // Without files either side the path string still decides (dummy weights, old manifests).
  Job other = make_job("manifest_old_path");
  { BatchOutputWriter w(other.options({}, "model-a")); }
  try {
    BatchOutputWriter w(other.options({}, "model-b"));
    FAIL() << "resumed with another model";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("now 'model-b', earlier 'model-a'"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace conveyor
