/* Golden bytes for prm/tests.rs: the DevX commands rshmem builds (same field values as the tests),
 * built with rdma-core's DEVX_SET / DEVX_SET64 (<infiniband/mlx5dv.h>) over NVSHMEM's PRM headers.
 * Prints, per command, its size and its nonzero bytes as (offset, value) pairs, the form of
 * prm/tests.rs's `golden` module. Not built by the tests (the headers are not installed by rdma-core).
 * To rerun, with libibverbs-dev installed and an NVSHMEM checkout at $NVSHMEM:
 *   cp $NVSHMEM/src/modules/transport/common/{mlx5_ifc.h,mlx5_prm.h} /tmp/ && \
 *   cc -Wall -I/tmp -o /tmp/devx_golden devx_golden.c && /tmp/devx_golden
 */
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <infiniband/mlx5dv.h>
#include "mlx5_ifc.h"
#include "mlx5_prm.h"

static void dump(const char *name, const uint8_t *b, size_t n) {
    printf("%s %zu:", name, n);
    for (size_t i = 0; i < n; i++) if (b[i]) printf(" (%zu, 0x%02x),", i, b[i]);
    printf("\n");
}

int main(void) {
    { uint8_t in[DEVX_ST_SZ_BYTES(query_hca_cap_in)] = {0};
      DEVX_SET(query_hca_cap_in, in, opcode, MLX5_CMD_OP_QUERY_HCA_CAP);
      DEVX_SET(query_hca_cap_in, in, op_mod, MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE | (MLX5_CAP_GENERAL << 1) | HCA_CAP_OPMOD_GET_CUR);
      dump("QUERY_HCA_CAP_GENERAL", in, sizeof in);
      memset(in, 0, sizeof in);
      DEVX_SET(query_hca_cap_in, in, opcode, MLX5_CMD_OP_QUERY_HCA_CAP);
      DEVX_SET(query_hca_cap_in, in, op_mod, MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE | (MLX5_CAP_ATOMIC << 1) | HCA_CAP_OPMOD_GET_CUR);
      dump("QUERY_HCA_CAP_ATOMIC", in, sizeof in); }
    { uint8_t in[DEVX_ST_SZ_BYTES(create_cq_in)] = {0};
      DEVX_SET(create_cq_in, in, opcode, MLX5_CMD_OP_CREATE_CQ);
      DEVX_SET(create_cq_in, in, cq_umem_id, 0x11);
      DEVX_SET(create_cq_in, in, cq_umem_valid, 1);
      DEVX_SET64(create_cq_in, in, cq_umem_offset, 0x0102030405060708ULL);
      void *c = DEVX_ADDR_OF(create_cq_in, in, cq_context);
      DEVX_SET(cqc, c, dbr_umem_valid, 1);
      DEVX_SET(cqc, c, cqe_sz, MLX5_CQE_SIZE_64B);
      DEVX_SET(cqc, c, cc, 1);
      DEVX_SET(cqc, c, oi, 1);
      DEVX_SET(cqc, c, dbr_umem_id, 0x22);
      DEVX_SET(cqc, c, log_cq_size, 10);
      DEVX_SET(cqc, c, uar_page, 0x1234);
      DEVX_SET(cqc, c, c_eqn, 7);
      DEVX_SET(cqc, c, log_page_size, 4);
      DEVX_SET64(cqc, c, dbr_addr, 0x1122334455667788ULL);
      dump("CREATE_CQ", in, sizeof in); }
    { uint8_t in[DEVX_ST_SZ_BYTES(create_qp_in)] = {0};
      DEVX_SET(create_qp_in, in, opcode, MLX5_CMD_OP_CREATE_QP);
      DEVX_SET(create_qp_in, in, wq_umem_id, 0x33);
      DEVX_SET64(create_qp_in, in, wq_umem_offset, 0x1000);
      DEVX_SET(create_qp_in, in, wq_umem_valid, 1);
      void *q = DEVX_ADDR_OF(create_qp_in, in, qpc);
      DEVX_SET(qpc, q, st, 0);
      DEVX_SET(qpc, q, pm_state, MLX5_QPC_PM_STATE_MIGRATED);
      DEVX_SET(qpc, q, pd, 0xabcde);
      DEVX_SET(qpc, q, uar_page, 0x54321);
      DEVX_SET(qpc, q, rq_type, 1);
      DEVX_SET(qpc, q, srqn_rmpn_xrqn, 0x789);
      DEVX_SET(qpc, q, cqn_snd, 0x123);
      DEVX_SET(qpc, q, cqn_rcv, 0x456);
      DEVX_SET(qpc, q, log_sq_size, 10);
      DEVX_SET(qpc, q, log_rq_size, 0);
      DEVX_SET(qpc, q, cs_req, 0);
      DEVX_SET(qpc, q, cs_res, 0);
      DEVX_SET(qpc, q, dbr_umem_valid, 1);
      DEVX_SET64(qpc, q, dbr_addr, 0x8);
      DEVX_SET(qpc, q, dbr_umem_id, 0x44);
      DEVX_SET(qpc, q, user_index, 0x5a5a5);
      DEVX_SET(qpc, q, page_offset, 0);
      dump("CREATE_QP", in, sizeof in); }
    for (int ib = 0; ib < 2; ib++) { uint8_t in[DEVX_ST_SZ_BYTES(rst2init_qp_in)] = {0};
      DEVX_SET(rst2init_qp_in, in, opcode, MLX5_CMD_OP_RST2INIT_QP);
      DEVX_SET(rst2init_qp_in, in, qpn, 0xabcdef);
      void *q = DEVX_ADDR_OF(rst2init_qp_in, in, qpc);
      DEVX_SET(qpc, q, rwe, 1); DEVX_SET(qpc, q, rre, 1); DEVX_SET(qpc, q, rae, 1);
      DEVX_SET(qpc, q, atomic_mode, 3);
      DEVX_SET(qpc, q, primary_address_path.vhca_port_num, 2);
      if (ib) DEVX_SET(qpc, q, primary_address_path.pkey_index, 0);
      DEVX_SET(qpc, q, pm_state, MLX5_QPC_PM_STATE_MIGRATED);
      DEVX_SET(qpc, q, counter_set_id, 0);
      dump(ib ? "RST2INIT_IB" : "RST2INIT_ETH", in, sizeof in); }
    { uint8_t in[DEVX_ST_SZ_BYTES(init2rtr_qp_in)] = {0};
      DEVX_SET(init2rtr_qp_in, in, opcode, MLX5_CMD_OP_INIT2RTR_QP);
      DEVX_SET(init2rtr_qp_in, in, qpn, 0xabcdef);
      void *q = DEVX_ADDR_OF(init2rtr_qp_in, in, qpc);
      DEVX_SET(qpc, q, mtu, 5); DEVX_SET(qpc, q, log_msg_max, 30);
      DEVX_SET(qpc, q, remote_qpn, 0x123456); DEVX_SET(qpc, q, min_rnr_nak, 12); DEVX_SET(qpc, q, log_rra_max, 4);
      DEVX_SET(qpc, q, primary_address_path.tclass, 0x28);
      DEVX_SET(qpc, q, primary_address_path.rlid, 0x1234);
      DEVX_SET(qpc, q, primary_address_path.mlid, 0);
      DEVX_SET(qpc, q, primary_address_path.sl, 3);
      DEVX_SET(qpc, q, primary_address_path.grh, 0);
      dump("INIT2RTR_IB", in, sizeof in); }
    { uint8_t in[DEVX_ST_SZ_BYTES(init2rtr_qp_in)] = {0};
      const uint8_t rmac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
      const uint8_t rgid[16] = {0,0,0,0,0,0,0,0,0,0,0xff,0xff,10,0,0,2};
      DEVX_SET(init2rtr_qp_in, in, opcode, MLX5_CMD_OP_INIT2RTR_QP);
      DEVX_SET(init2rtr_qp_in, in, qpn, 0xabcdef);
      void *q = DEVX_ADDR_OF(init2rtr_qp_in, in, qpc);
      DEVX_SET(qpc, q, mtu, 3); DEVX_SET(qpc, q, log_msg_max, 30);
      DEVX_SET(qpc, q, remote_qpn, 0x123456); DEVX_SET(qpc, q, min_rnr_nak, 12); DEVX_SET(qpc, q, log_rra_max, 4);
      memcpy(DEVX_ADDR_OF(qpc, q, primary_address_path.rmac_47_32), rmac, 6);
      DEVX_SET(qpc, q, primary_address_path.hop_limit, 255);
      DEVX_SET(qpc, q, primary_address_path.src_addr_index, 3);
      DEVX_SET(qpc, q, primary_address_path.eth_prio, 5);
      DEVX_SET(qpc, q, primary_address_path.udp_sport, 0xc000);
      DEVX_SET(qpc, q, primary_address_path.dscp, 0x68 >> 2);
      memcpy(DEVX_ADDR_OF(qpc, q, primary_address_path.rgid_rip), rgid, 16);
      dump("INIT2RTR_ROCE", in, sizeof in); }
    { uint8_t in[DEVX_ST_SZ_BYTES(rtr2rts_qp_in)] = {0};
      DEVX_SET(rtr2rts_qp_in, in, opcode, MLX5_CMD_OP_RTR2RTS_QP);
      DEVX_SET(rtr2rts_qp_in, in, qpn, 0xabcdef);
      void *q = DEVX_ADDR_OF(rtr2rts_qp_in, in, qpc);
      DEVX_SET(qpc, q, log_ack_req_freq, 0); DEVX_SET(qpc, q, log_sra_max, 4);
      DEVX_SET(qpc, q, next_send_psn, 0); DEVX_SET(qpc, q, retry_count, 7); DEVX_SET(qpc, q, rnr_retry, 7);
      DEVX_SET(qpc, q, primary_address_path.ack_timeout, 20);
      dump("RTR2RTS", in, sizeof in); }
    /* Capability outputs: the fields rshmem reads, set to distinct values. */
    { uint8_t out[DEVX_ST_SZ_BYTES(query_hca_cap_out)] = {0};
      void *cap = DEVX_ADDR_OF(query_hca_cap_out, out, capability.cmd_hca_cap);
      DEVX_SET(cmd_hca_cap, cap, cqe_version, 1); DEVX_SET(cmd_hca_cap, cap, atomic, 1); DEVX_SET(cmd_hca_cap, cap, roce, 1);
      DEVX_SET(cmd_hca_cap, cap, cq_oi, 1); DEVX_SET(cmd_hca_cap, cap, log_max_qp_sz, 15); DEVX_SET(cmd_hca_cap, cap, log_max_cq_sz, 22);
      DEVX_SET(cmd_hca_cap, cap, log_max_msg, 30); DEVX_SET(cmd_hca_cap, cap, log_bf_reg_size, 9);
      dump("CAP_GENERAL_OUT", out, sizeof out);
      memset(out, 0, sizeof out);
      cap = DEVX_ADDR_OF(query_hca_cap_out, out, capability.atomic_caps);
      DEVX_SET(atomic_caps, cap, atomic_operations, 0xf); DEVX_SET(atomic_caps, cap, atomic_size_qp, 0xc);
      DEVX_SET(atomic_caps, cap, atomic_size_dc, 0x8);
      dump("CAP_ATOMIC_OUT", out, sizeof out); }
    return 0;
}
