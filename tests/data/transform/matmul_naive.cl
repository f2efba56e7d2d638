// Naive matrix multiplication C = A * B for square n x n matrices (row-major):
// one work-item per element of C, every operand read from global memory.
__kernel void matmul(__global float* C, __global const float* A, __global const float* B, const int n) {
    int x = get_global_id(0);
    int y = get_global_id(1);
    if (x < n && y < n) {
        float sum = 0.0f;
        for (int k = 0; k < n; k++) {
            sum += A[y * n + k] * B[k * n + x];
        }
        C[y * n + x] = sum;
    }
}
