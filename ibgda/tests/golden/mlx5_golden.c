/* Golden WQE, CQE and doorbell bytes built with rdma-core's <infiniband/mlx5dv.h>, for
 * ibgda/tests/golden.rs, which builds the same things with rshmem-ibgda and compares the bytes.
 *
 * Reads one request per line on stdin (numbers in hex), prints one line per request: the bytes in
 * hex, or "name value" pairs for the layout request.
 *   W pi qpn fm raddr rkey laddr lkey len           RDMA WRITE (ctrl, raddr, data)
 *   R pi qpn fm raddr rkey laddr lkey len           RDMA READ
 *   I pi qpn fm raddr rkey len hexbytes             RDMA WRITE inline (hexbytes "-" when len is 0)
 *   A pi qpn fm raddr rkey laddr lkey kind a b c d  atomic; kind 0 FA64 (a), 1 CS64 (compare a, swap
 *                                                   b), 2 masked FA32 (add a, boundary b), 3 masked
 *                                                   CS32 (swap a, compare b, swap_mask c, compare_mask
 *                                                   d), 4 masked FA64, 5 masked CS64 (as 3)
 *   N pi qpn fm                                     NOP (ds 2, as NVSHMEM)
 *   D pi qpn fm laddr lkey len                      NVSHMEM's DUMP (ctrl, data)
 *   B pi qpn                                        QP doorbell record (8 bytes), then the doorbell
 *                                                   (8 bytes)
 *   C qpn counter wqe_opcode byte_cnt owner         requester CQE
 *   E qpn counter wqe_opcode syndrome vendor owner  requester error CQE
 *   L                                               struct offsets, sizes and constants
 *
 * What comes from the header: the structs (mlx5_wqe_ctrl_seg, _raddr_seg, _data_seg, _inl_data_seg,
 * _atomic_seg, mlx5_cqe64, mlx5_err_cqe), mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg, the opcodes and
 * MLX5_INLINE_SEG, MLX5_SND_DBR, MLX5_CQE_REQ(_ERR). What does not (the header has no such struct):
 * the 4-byte masked-atomic operand layout and the masked opmod values 0x08/0x09 (research note §1.7,
 * NVSHMEM's ibgda_device.cuh), written here as BE32 words at offsets 0, 4, 8, 12 of an atomic
 * segment; the 8-byte masked operands use mlx5_wqe_atomic_seg (two of them for CS), DUMP's opcode
 * 0x23 (NVSHMEM). */
#include <endian.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/mlx5dv.h>

#define EXT_AMO_4 0x08
#define EXT_AMO_8 0x09
#define OPCODE_DUMP 0x23

static uint8_t wqe[4 * MLX5_SEND_WQE_BB];

static void hex(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
    printf("\n");
}

static struct mlx5_wqe_raddr_seg *raddr_at(size_t off, uint64_t raddr, uint32_t rkey) {
    struct mlx5_wqe_raddr_seg *r = (void *)(wqe + off);
    r->raddr = htobe64(raddr);
    r->rkey = htobe32(rkey);
    r->reserved = 0;
    return r;
}

int main(void) {
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        memset(wqe, 0, sizeof wqe);
        char k = line[0];
        char *p = line + 1;
#define NEXT() strtoull(p, &p, 16)
        if (k == 'W' || k == 'R') {
            uint16_t pi = NEXT(); uint32_t qpn = NEXT(); uint8_t fm = NEXT();
            uint64_t raddr = NEXT(); uint32_t rkey = NEXT(); uint64_t laddr = NEXT(); uint32_t lkey = NEXT(); uint32_t len = NEXT();
            size_t sz = sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_raddr_seg) + sizeof(struct mlx5_wqe_data_seg);
            uint8_t ds = sz / 16;
            mlx5dv_set_ctrl_seg((void *)wqe, pi, k == 'W' ? MLX5_OPCODE_RDMA_WRITE : MLX5_OPCODE_RDMA_READ, 0, qpn, fm, ds, 0, 0);
            raddr_at(sizeof(struct mlx5_wqe_ctrl_seg), raddr, rkey);
            mlx5dv_set_data_seg((void *)(wqe + sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_raddr_seg)), len, lkey, laddr);
            hex(wqe, sz);
        } else if (k == 'I') {
            uint16_t pi = NEXT(); uint32_t qpn = NEXT(); uint8_t fm = NEXT();
            uint64_t raddr = NEXT(); uint32_t rkey = NEXT(); uint32_t len = NEXT();
            size_t off = sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_raddr_seg);
            struct mlx5_wqe_inl_data_seg *inl = (void *)(wqe + off);
            inl->byte_count = htobe32(len | MLX5_INLINE_SEG);
            uint8_t *data = (uint8_t *)(inl + 1);
            while (*p == ' ') p++;
            for (uint32_t i = 0; i < len; i++) {
                char b[3] = {p[2 * i], p[2 * i + 1], 0};
                data[i] = strtoul(b, NULL, 16);
            }
            size_t inl_sz = (sizeof(*inl) + len + 15) / 16 * 16;
            size_t sz = off + inl_sz;
            mlx5dv_set_ctrl_seg((void *)wqe, pi, MLX5_OPCODE_RDMA_WRITE, 0, qpn, fm, sz / 16, 0, 0);
            raddr_at(sizeof(struct mlx5_wqe_ctrl_seg), raddr, rkey);
            hex(wqe, sz);
        } else if (k == 'A') {
            uint16_t pi = NEXT(); uint32_t qpn = NEXT(); uint8_t fm = NEXT();
            uint64_t raddr = NEXT(); uint32_t rkey = NEXT(); uint64_t laddr = NEXT(); uint32_t lkey = NEXT();
            int kind = NEXT(); uint64_t a = NEXT(), b = NEXT(), c = NEXT(), d = NEXT();
            size_t off = sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_raddr_seg);
            struct mlx5_wqe_atomic_seg *at = (void *)(wqe + off);
            uint8_t opcode, opmod = 0;
            uint32_t bytes = 8;
            size_t nseg = 1;
            switch (kind) {
            case 0: opcode = MLX5_OPCODE_ATOMIC_FA; at->swap_add = htobe64(a); at->compare = 0; break;
            case 1: opcode = MLX5_OPCODE_ATOMIC_CS; at->compare = htobe64(a); at->swap_add = htobe64(b); break;
            case 2: case 3: {
                uint32_t w[4] = {htobe32(a), htobe32(b), kind == 3 ? htobe32(c) : 0, kind == 3 ? htobe32(d) : 0};
                opcode = kind == 2 ? MLX5_OPCODE_ATOMIC_MASKED_FA : MLX5_OPCODE_ATOMIC_MASKED_CS;
                opmod = EXT_AMO_4; bytes = 4;
                memcpy(at, w, sizeof w);
                break;
            }
            case 4: opcode = MLX5_OPCODE_ATOMIC_MASKED_FA; opmod = EXT_AMO_8; at->swap_add = htobe64(a); at->compare = htobe64(b); break;
            default:
                opcode = MLX5_OPCODE_ATOMIC_MASKED_CS; opmod = EXT_AMO_8; nseg = 2;
                at[0].swap_add = htobe64(a); at[0].compare = htobe64(b);
                at[1].swap_add = htobe64(c); at[1].compare = htobe64(d);
                break;
            }
            size_t dseg = off + nseg * sizeof(struct mlx5_wqe_atomic_seg);
            mlx5dv_set_data_seg((void *)(wqe + dseg), bytes, lkey, laddr);
            size_t sz = dseg + sizeof(struct mlx5_wqe_data_seg);
            mlx5dv_set_ctrl_seg((void *)wqe, pi, opcode, opmod, qpn, fm, sz / 16, 0, 0);
            raddr_at(sizeof(struct mlx5_wqe_ctrl_seg), raddr, rkey);
            hex(wqe, sz);
        } else if (k == 'N') {
            uint16_t pi = NEXT(); uint32_t qpn = NEXT(); uint8_t fm = NEXT();
            mlx5dv_set_ctrl_seg((void *)wqe, pi, MLX5_OPCODE_NOP, 0, qpn, fm, 2, 0, 0);
            hex(wqe, 32);
        } else if (k == 'D') {
            uint16_t pi = NEXT(); uint32_t qpn = NEXT(); uint8_t fm = NEXT();
            uint64_t laddr = NEXT(); uint32_t lkey = NEXT(); uint32_t len = NEXT();
            size_t sz = sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_data_seg);
            mlx5dv_set_ctrl_seg((void *)wqe, pi, OPCODE_DUMP, 0, qpn, fm, sz / 16, 0, 0);
            mlx5dv_set_data_seg((void *)(wqe + sizeof(struct mlx5_wqe_ctrl_seg)), len, lkey, laddr);
            hex(wqe, sz);
        } else if (k == 'B') {
            uint16_t pi = NEXT(); uint32_t qpn = NEXT();
            uint32_t dbrec[2] = {0, 0};
            dbrec[MLX5_SND_DBR] = htobe32(pi & 0xffff);
            struct mlx5_wqe_ctrl_seg db;
            memset(&db, 0, sizeof db);
            mlx5dv_set_ctrl_seg(&db, pi, 0, 0, qpn, 0, 0, 0, 0);
            uint8_t out[16];
            memcpy(out, dbrec, 8);
            memcpy(out + 8, &db, 8);
            hex(out, 16);
        } else if (k == 'C') {
            uint32_t qpn = NEXT(); uint16_t counter = NEXT(); uint8_t op = NEXT(); uint32_t bc = NEXT(); uint8_t owner = NEXT();
            struct mlx5_cqe64 c;
            memset(&c, 0, sizeof c);
            c.byte_cnt = htobe32(bc);
            c.sop_drop_qpn = htobe32(((uint32_t)op << 24) | qpn);
            c.wqe_counter = htobe16(counter);
            c.op_own = MLX5_CQE_REQ << 4;
            mlx5dv_set_cqe_owner(&c, owner);
            hex(&c, sizeof c);
        } else if (k == 'E') {
            uint32_t qpn = NEXT(); uint16_t counter = NEXT(); uint8_t op = NEXT(); uint8_t syn = NEXT(); uint8_t vendor = NEXT(); uint8_t owner = NEXT();
            struct mlx5_err_cqe e;
            memset(&e, 0, sizeof e);
            e.syndrome = syn;
            e.vendor_err_synd = vendor;
            e.s_wqe_opcode_qpn = htobe32(((uint32_t)op << 24) | qpn);
            e.wqe_counter = htobe16(counter);
            e.op_own = (MLX5_CQE_REQ_ERR << 4) | (owner & 1);
            hex(&e, sizeof e);
        } else if (k == 'L') {
#define O(s, f) printf("%s.%s %zu ", #s, #f, offsetof(struct s, f))
#define S(s) printf("sizeof.%s %zu ", #s, sizeof(struct s))
#define K(c) printf("%s %lu ", #c, (unsigned long)(c))
            S(mlx5_wqe_ctrl_seg); O(mlx5_wqe_ctrl_seg, opmod_idx_opcode); O(mlx5_wqe_ctrl_seg, qpn_ds); O(mlx5_wqe_ctrl_seg, signature);
            O(mlx5_wqe_ctrl_seg, dci_stream_channel_id); O(mlx5_wqe_ctrl_seg, fm_ce_se); O(mlx5_wqe_ctrl_seg, imm);
            S(mlx5_wqe_raddr_seg); O(mlx5_wqe_raddr_seg, raddr); O(mlx5_wqe_raddr_seg, rkey); O(mlx5_wqe_raddr_seg, reserved);
            S(mlx5_wqe_data_seg); O(mlx5_wqe_data_seg, byte_count); O(mlx5_wqe_data_seg, lkey); O(mlx5_wqe_data_seg, addr);
            S(mlx5_wqe_inl_data_seg); O(mlx5_wqe_inl_data_seg, byte_count);
            S(mlx5_wqe_atomic_seg); O(mlx5_wqe_atomic_seg, swap_add); O(mlx5_wqe_atomic_seg, compare);
            S(mlx5_cqe64); O(mlx5_cqe64, wqe_id); O(mlx5_cqe64, ml_path); O(mlx5_cqe64, slid); O(mlx5_cqe64, flags_rqpn); O(mlx5_cqe64, srqn_uidx);
            O(mlx5_cqe64, imm_inval_pkey); O(mlx5_cqe64, app); O(mlx5_cqe64, byte_cnt); O(mlx5_cqe64, timestamp); O(mlx5_cqe64, sop_drop_qpn);
            O(mlx5_cqe64, wqe_counter); O(mlx5_cqe64, signature); O(mlx5_cqe64, op_own);
            S(mlx5_err_cqe); O(mlx5_err_cqe, srqn); O(mlx5_err_cqe, vendor_err_synd); O(mlx5_err_cqe, syndrome); O(mlx5_err_cqe, s_wqe_opcode_qpn);
            O(mlx5_err_cqe, wqe_counter); O(mlx5_err_cqe, signature); O(mlx5_err_cqe, op_own);
            K(MLX5_OPCODE_NOP); K(MLX5_OPCODE_SEND_INVAL); K(MLX5_OPCODE_RDMA_WRITE); K(MLX5_OPCODE_RDMA_WRITE_IMM); K(MLX5_OPCODE_SEND); K(MLX5_OPCODE_SEND_IMM);
            K(MLX5_OPCODE_RDMA_READ); K(MLX5_OPCODE_ATOMIC_CS); K(MLX5_OPCODE_ATOMIC_FA); K(MLX5_OPCODE_ATOMIC_MASKED_CS); K(MLX5_OPCODE_ATOMIC_MASKED_FA);
            K(MLX5_OPCODE_LOCAL_INVAL); K(MLX5_OPCODE_UMR);
            K(MLX5_WQE_CTRL_CQ_UPDATE); K(MLX5_WQE_CTRL_SOLICITED); K(MLX5_WQE_CTRL_FENCE); K(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
            K(MLX5_INLINE_SEG); K(MLX5_INVALID_LKEY); K(MLX5_SEND_WQE_BB); K(MLX5_SEND_WQE_SHIFT); K(MLX5_SND_DBR); K(MLX5_RCV_DBR);
            K(MLX5_CQE_REQ); K(MLX5_CQE_RESP_WR_IMM); K(MLX5_CQE_RESP_SEND); K(MLX5_CQE_RESP_SEND_IMM); K(MLX5_CQE_RESP_SEND_INV); K(MLX5_CQE_REQ_ERR); K(MLX5_CQE_RESP_ERR); K(MLX5_CQE_INVALID);
            K(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR); K(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR); K(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR); K(MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
            K(MLX5_CQE_SYNDROME_MW_BIND_ERR); K(MLX5_CQE_SYNDROME_BAD_RESP_ERR); K(MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR); K(MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
            K(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR); K(MLX5_CQE_SYNDROME_REMOTE_OP_ERR); K(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR); K(MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
            K(MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
            printf("\n");
        } else {
            printf("?\n");
        }
        fflush(stdout);
    }
    return 0;
}
