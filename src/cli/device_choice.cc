#include "cli/device_choice.h"

#include "backends/cuda/cuda.h"
#include "train/capabilities.h"

namespace lj::cli {

StatusOr<RunDevice> choose_device(std::string_view requested, const DeviceHost& host) {
  const bool cuda_runs = host.built_with_cuda && host.gpu_count > 0 && host.cuda_executor;
  if (requested == "cpu") return RunDevice::cpu;
  if (requested == "auto") return cuda_runs ? RunDevice::cuda : RunDevice::cpu;
  if (requested != "cuda") {
    return invalid_argument("--device " + std::string(requested) + " is not a device",
                            "use auto (the default), cpu or cuda");
  }
  if (!host.built_with_cuda) {
    return invalid_argument("--device cuda: this ljperf was built without CUDA",
                            "rebuild with cmake -DLJ_CUDA=ON (needs the CUDA toolkit), or use "
                            "--device cpu");
  }
  if (host.gpu_count == 0) {
    return unimplemented(
        "--device cuda: no GPU here (" +
            (host.probe_error.empty() ? std::string("the CUDA runtime lists none")
                                      : host.probe_error) +
            ")",
        "run on a host with an NVIDIA GPU and driver (`ljperf doctor` checks them), or use "
        "--device cpu");
  }
  if (!host.cuda_executor) {
    return unimplemented("--device cuda: " + host.command + " does not run on the GPU yet",
                         "use --device cpu");
  }
  return RunDevice::cuda;
}

DeviceHost probe_device_host(const std::string& command, bool runs_on_cuda) {
  DeviceHost h;
  h.built_with_cuda = cuda::built_with_cuda();
  h.cuda_executor = runs_on_cuda && h.built_with_cuda;
  h.command = command;
  // Only a CUDA build asks the runtime (it initialises a context: not free).
  if (!h.built_with_cuda) return h;
  const cuda::Probe p = cuda::probe();
  h.gpu_count = p.device_count();
  h.probe_error = p.error;
  return h;
}

void add_device_flag(CLI::App* sub, std::string* device) {
  sub->add_option("--device", *device,
                  "auto, cpu or cuda; auto is cuda when ljperf was built with CUDA and a GPU is "
                  "present, else cpu. cuda: one GPU per process (under mpirun, the local rank's; "
                  "gradients over NCCL). cuda takes " +
                      capability_summary(TrainDevice::cuda))
      ->capture_default_str();
}

}  // namespace lj::cli
