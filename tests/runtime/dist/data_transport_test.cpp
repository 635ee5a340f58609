// parallel.data_transport: auto picks NCCL only where a group's devices are distinct, nccl on a shared
// GPU and ipc are refused with the reason, and the duplicate test that finds shared devices.
#include "runtime/dist/data_transport.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

std::string refusal(DataTransport t, bool shared) {
  try {
    choose_transport(t, shared, "pipeline of data 0, tensor 0");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DataTransport, AutoIsNcclOnDistinctDevicesAndStagedOnAShared) {
  EXPECT_EQ(choose_transport(DataTransport::kAuto, false, "g"), DataTransport::kNccl);
  EXPECT_EQ(choose_transport(DataTransport::kAuto, true, "g"), DataTransport::kStaged);
  EXPECT_EQ(choose_transport(DataTransport::kStaged, false, "g"), DataTransport::kStaged);
  EXPECT_EQ(choose_transport(DataTransport::kNccl, false, "g"), DataTransport::kNccl);
}

TEST(DataTransport, NcclOnASharedDeviceAndIpcAreRefusedWithTheReason) {
  const std::string nccl = refusal(DataTransport::kNccl, true);
  EXPECT_NE(nccl.find("Duplicate GPU"), std::string::npos) << nccl;
  EXPECT_NE(nccl.find("pipeline of data 0, tensor 0"), std::string::npos) << nccl;
  EXPECT_NE(nccl.find("staged"), std::string::npos) << nccl;
  const std::string ipc = refusal(DataTransport::kIpc, false);
  EXPECT_NE(ipc.find("not built yet"), std::string::npos) << ipc;
}

TEST(DataTransport, NamesRoundTripAndUnknownOnesAreRefused) {
  for (auto t : {DataTransport::kAuto, DataTransport::kNccl, DataTransport::kStaged, DataTransport::kIpc})
    EXPECT_EQ(parse_data_transport(transport_name(t)), t);
  EXPECT_THROW(parse_data_transport("shm"), Error);
}

TEST(DataTransport, DuplicatesAndCountsOfDeviceIdentities) {
  EXPECT_FALSE(has_duplicate({"a/GPU-1", "a/GPU-2", "b/GPU-1"}));
  EXPECT_TRUE(has_duplicate({"a/GPU-1", "b/GPU-1", "a/GPU-1"}));
  EXPECT_FALSE(has_duplicate({"a/GPU-1"}));
  EXPECT_EQ(count_equal({"a/GPU-1", "a/GPU-2", "a/GPU-1", "a/GPU-1"}, "a/GPU-1"), 3);
  EXPECT_EQ(count_equal({"a/GPU-2"}, "a/GPU-2"), 1);
}

}  // namespace
}  // namespace conveyor
