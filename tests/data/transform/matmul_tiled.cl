// A scripted model's rewrite of matmul_naive.cl: tiles of A and B staged in local memory, each
// work-item computing WPT rows of C. Written as a model might write it: the #define below is
// removed by kerntune (Kernel Tuner defines every tunable parameter).
#define TILE_K 16
__kernel void matmul(__global float* C, __global const float* A, __global const float* B, const int n) {
    __local float As[block_size_y * WPT][TILE_K];
    __local float Bs[TILE_K][block_size_x];
    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int x = get_global_id(0);
    const int row0 = get_group_id(1) * block_size_y * WPT;
    float acc[WPT];
    for (int j = 0; j < WPT; j++) acc[j] = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE_K) {
        for (int r = ty; r < block_size_y * WPT; r += block_size_y)
            for (int i = tx; i < TILE_K; i += block_size_x)
                As[r][i] = (row0 + r < n && k0 + i < n) ? A[(row0 + r) * n + k0 + i] : 0.0f;
        for (int i = ty; i < TILE_K; i += block_size_y)
            Bs[i][tx] = (x < n && k0 + i < n) ? B[(k0 + i) * n + x] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE_K; k++) {
            const float b = Bs[k][tx];
            for (int j = 0; j < WPT; j++) acc[j] += As[ty + j * block_size_y][k] * b;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int j = 0; j < WPT; j++) {
        const int y = row0 + ty + j * block_size_y;
        if (x < n && y < n) C[y * n + x] = acc[j];
    }
}
