// RUN: helm-opt %s --split-input-file --verify-diagnostics --helm-lower-to-device-calls

// A slice of the batch dimension has no device kernel.
module {
  func.func @helm_gpu_stage(%ctx: !llvm.ptr, %x: tensor<?x?x16xf32>, %pos: tensor<?x?xi64>) -> tensor<?x?x16xf32> attributes {helm.stage = "gpu"} {
    // expected-error @+1 {{device stage: unsupported slice (only one inner dimension, unit strides)}}
    %s = tensor.extract_slice %x[0, 0, 0] [1, 1, 16] [1, 1, 1] : tensor<?x?x16xf32> to tensor<1x1x16xf32>
    %c = tensor.cast %s : tensor<1x1x16xf32> to tensor<?x?x16xf32>
    return %c : tensor<?x?x16xf32>
  }
}

// -----

// Ops outside the HELM block ops cannot run on the device.
module {
  func.func @helm_gpu_stage(%ctx: !llvm.ptr, %x: tensor<?x?x16xf32>, %pos: tensor<?x?xi64>) -> tensor<?x?x16xf32> attributes {helm.stage = "gpu"} {
    %c0 = arith.constant 0 : index
    %b = tensor.dim %x, %c0 : tensor<?x?x16xf32>
    // expected-error @+1 {{no device kernel for tensor.empty (a device stage can only run HELM block ops)}}
    %e = tensor.empty(%b, %b) : tensor<?x?x16xf32>
    return %e : tensor<?x?x16xf32>
  }
}

// -----

// expected-error @+1 {{no gpu stage function to lower; run helm-stage-split first}}
module {
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %x: tensor<?x?x16xf32>, %pos: tensor<?x?xi64>) -> tensor<?x?x16xf32> attributes {helm.stage = "cpu"} {
    return %x : tensor<?x?x16xf32>
  }
}
