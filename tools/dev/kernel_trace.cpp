// Every kernel's start, end, grid and name, CUDA graph nodes included, from CUPTI's activity API,
// written as CSV (start,end,graph,grid,block,name; ns) at exit: a timeline of a decode step's
// kernels where Nsight Systems is not installed. An injection library, loaded by the CUDA driver:
//   g++ -O2 -shared -fPIC -o libkernel_trace.so tools/dev/kernel_trace.cpp -I$CUDA/include
//       -L$CUDA/lib64 -lcupti -Wl,-rpath,'$ORIGIN'   (one line)
//   CUDA_INJECTION64_PATH=$PWD/libkernel_trace.so KERNEL_TRACE_OUT=trace.csv build/deltatron generate ...
//   python3 tools/dev/kernel_trace.py trace.csv
// (ship libcupti.so with it to a host that lacks it). Kernel records leave concurrency as it is, so
// programmatic dependent launch shows as a kernel starting before the one it waits on ends.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

FILE* out = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buf, size_t* size, size_t* max_records) {
  *size = size_t{8} << 20;
  *buf = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
    int status = 0;
    char* demangled = abi::__cxa_demangle(k->name, nullptr, nullptr, &status);
    std::string name = demangled ? demangled : k->name;
    free(demangled);
    for (char& c : name)
      if (c == ',') c = ';';  // one CSV field
    fprintf(out, "%llu,%llu,%u,%d,%d,%s\n", static_cast<unsigned long long>(k->start),
            static_cast<unsigned long long>(k->end), k->graphId, k->gridX, k->blockX, name.c_str());
  }
  free(buf);
}

void finish() {
  cuptiActivityFlushAll(1);
  fclose(out);
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* path = getenv("KERNEL_TRACE_OUT");
  out = fopen(path ? path : "kernel_trace.csv", "w");
  if (!out) return 0;
  fprintf(out, "start,end,graph,grid,block,name\n");
  cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushPeriod(200);  // ms: records reach the file while the process runs
  atexit(finish);
  return 1;
}
