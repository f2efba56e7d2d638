// A planted wrong rewrite: the k loop unrolled by UNROLL, but A is read transposed
// (A[k][y] instead of A[y][k]). It compiles and runs; its output is wrong for every UNROLL.
__kernel void matmul(__global float* C, __global const float* A, __global const float* B, const int n) {
    int x = get_global_id(0);
    int y = get_global_id(1);
    if (x < n && y < n) {
        float sum = 0.0f;
        int k = 0;
        for (; k + UNROLL <= n; k += UNROLL) {
            #pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                sum += A[(k + u) * n + y] * B[(k + u) * n + x];
            }
        }
        for (; k < n; k++) {
            sum += A[k * n + y] * B[k * n + x];
        }
        C[y * n + x] = sum;
    }
}
