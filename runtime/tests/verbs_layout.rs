//! The verbs and mlx5dv structs the `verbs` feature passes to rdma-core, against the system's headers:
//! every size, offset and constant below is also computed by a C program compiled against
//! `<infiniband/verbs.h>` and `<infiniband/mlx5dv.h>`, and the two must agree. Covers the structs
//! `rdma-sys` writes by hand (`ibv_send_wr`, `ibv_wc`, `ibv_ah_attr`, `ibv_gid`; bindgen's own are
//! laid out from the header by construction, and are checked where rshmem relies on a field), the
//! context ops `rdma-sys`'s inline `ibv_post_send`/`ibv_poll_cq` call through, and rshmem's own
//! mlx5dv declarations (`transport::verbs::sys`).
//!
//! Needs a C compiler and libibverbs-dev (scripts/setup.sh installs it). Without them the test is
//! skipped with a one-line message, or fails under scripts/test.sh (`RSHMEM_TEST_NO_SKIP=1`,
//! `rshmem_test_support::skip`).
#![cfg(feature = "verbs")]

use rdma_sys::*;
use rshmem::transport::verbs::sys::{self as vs, Mlx5WqeAv, Mlx5dvAh, Mlx5dvContextAttr, Mlx5dvCq, Mlx5dvDevxUar, Mlx5dvDevxUmem, Mlx5dvDevxUmemIn, Mlx5dvObj, Mlx5dvPd, Mlx5dvSrq};
use std::mem::{offset_of, size_of};
use std::process::Command;

/// (C expression, the Rust value): sizes, offsets and constants.
macro_rules! probes {
    ($($c:literal => $rust:expr),* $(,)?) => { vec![$(($c, ($rust) as u64)),*] };
}

fn probes() -> Vec<(&'static str, u64)> {
    probes![
        // rdma-sys's hand-written types.
        "sizeof(union ibv_gid)" => size_of::<ibv_gid>(),
        "sizeof(struct ibv_global_route)" => size_of::<ibv_global_route>(),
        "offsetof(struct ibv_global_route, sgid_index)" => offset_of!(ibv_global_route, sgid_index),
        "offsetof(struct ibv_global_route, hop_limit)" => offset_of!(ibv_global_route, hop_limit),
        "offsetof(struct ibv_global_route, traffic_class)" => offset_of!(ibv_global_route, traffic_class),
        "sizeof(struct ibv_ah_attr)" => size_of::<ibv_ah_attr>(),
        "offsetof(struct ibv_ah_attr, dlid)" => offset_of!(ibv_ah_attr, dlid),
        "offsetof(struct ibv_ah_attr, sl)" => offset_of!(ibv_ah_attr, sl),
        "offsetof(struct ibv_ah_attr, is_global)" => offset_of!(ibv_ah_attr, is_global),
        "offsetof(struct ibv_ah_attr, port_num)" => offset_of!(ibv_ah_attr, port_num),
        "sizeof(struct ibv_send_wr)" => size_of::<ibv_send_wr>(),
        "offsetof(struct ibv_send_wr, sg_list)" => offset_of!(ibv_send_wr, sg_list),
        "offsetof(struct ibv_send_wr, num_sge)" => offset_of!(ibv_send_wr, num_sge),
        "offsetof(struct ibv_send_wr, opcode)" => offset_of!(ibv_send_wr, opcode),
        "offsetof(struct ibv_send_wr, send_flags)" => offset_of!(ibv_send_wr, send_flags),
        "offsetof(struct ibv_send_wr, wr.rdma.remote_addr)" => offset_of!(ibv_send_wr, wr) + offset_of!(rdma_t, remote_addr),
        "offsetof(struct ibv_send_wr, wr.rdma.rkey)" => offset_of!(ibv_send_wr, wr) + offset_of!(rdma_t, rkey),
        "offsetof(struct ibv_send_wr, wr.atomic.remote_addr)" => offset_of!(ibv_send_wr, wr) + offset_of!(atomic_t, remote_addr),
        "offsetof(struct ibv_send_wr, wr.atomic.compare_add)" => offset_of!(ibv_send_wr, wr) + offset_of!(atomic_t, compare_add),
        "offsetof(struct ibv_send_wr, wr.atomic.swap)" => offset_of!(ibv_send_wr, wr) + offset_of!(atomic_t, swap),
        "offsetof(struct ibv_send_wr, wr.atomic.rkey)" => offset_of!(ibv_send_wr, wr) + offset_of!(atomic_t, rkey),
        "sizeof(struct ibv_wc)" => size_of::<ibv_wc>(),
        "offsetof(struct ibv_wc, status)" => offset_of!(ibv_wc, status),
        "offsetof(struct ibv_wc, vendor_err)" => offset_of!(ibv_wc, vendor_err),
        "offsetof(struct ibv_wc, byte_len)" => offset_of!(ibv_wc, byte_len),
        "offsetof(struct ibv_wc, qp_num)" => offset_of!(ibv_wc, qp_num),
        // bindgen's types, where rshmem relies on a field.
        "sizeof(struct ibv_sge)" => size_of::<ibv_sge>(),
        "sizeof(struct ibv_port_attr)" => size_of::<ibv_port_attr>(),
        "offsetof(struct ibv_port_attr, active_mtu)" => offset_of!(ibv_port_attr, active_mtu),
        "offsetof(struct ibv_port_attr, gid_tbl_len)" => offset_of!(ibv_port_attr, gid_tbl_len),
        "offsetof(struct ibv_port_attr, lid)" => offset_of!(ibv_port_attr, lid),
        "offsetof(struct ibv_port_attr, link_layer)" => offset_of!(ibv_port_attr, link_layer),
        "sizeof(struct ibv_device_attr)" => size_of::<ibv_device_attr>(),
        "offsetof(struct ibv_device_attr, max_qp_rd_atom)" => offset_of!(ibv_device_attr, max_qp_rd_atom),
        "offsetof(struct ibv_device_attr, atomic_cap)" => offset_of!(ibv_device_attr, atomic_cap),
        "offsetof(struct ibv_device_attr, phys_port_cnt)" => offset_of!(ibv_device_attr, phys_port_cnt),
        "sizeof(struct ibv_gid_entry)" => size_of::<ibv_gid_entry>(),
        "offsetof(struct ibv_gid_entry, gid_type)" => offset_of!(ibv_gid_entry, gid_type),
        "sizeof(struct ibv_qp_init_attr)" => size_of::<ibv_qp_init_attr>(),
        "offsetof(struct ibv_qp_init_attr, cap.max_inline_data)" => offset_of!(ibv_qp_init_attr, cap) + offset_of!(ibv_qp_cap, max_inline_data),
        "offsetof(struct ibv_qp_init_attr, qp_type)" => offset_of!(ibv_qp_init_attr, qp_type),
        "sizeof(struct ibv_qp_attr)" => size_of::<ibv_qp_attr>(),
        "offsetof(struct ibv_qp_attr, ah_attr)" => offset_of!(ibv_qp_attr, ah_attr),
        "offsetof(struct ibv_qp_attr, max_dest_rd_atomic)" => offset_of!(ibv_qp_attr, max_dest_rd_atomic),
        "offsetof(struct ibv_qp_attr, rnr_retry)" => offset_of!(ibv_qp_attr, rnr_retry),
        "sizeof(struct ibv_srq_init_attr)" => size_of::<ibv_srq_init_attr>(),
        "offsetof(struct ibv_qp, qp_num)" => offset_of!(ibv_qp, qp_num),
        "offsetof(struct ibv_qp, context)" => offset_of!(ibv_qp, context),
        "offsetof(struct ibv_cq, context)" => offset_of!(ibv_cq, context),
        "offsetof(struct ibv_mr, lkey)" => offset_of!(ibv_mr, lkey),
        "offsetof(struct ibv_mr, rkey)" => offset_of!(ibv_mr, rkey),
        // The ops rdma-sys's ibv_post_send and ibv_poll_cq call through.
        "offsetof(struct ibv_context, ops.post_send)" => offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, post_send),
        "offsetof(struct ibv_context, ops.poll_cq)" => offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, poll_cq),
        // rshmem's mlx5dv declarations (mlx5dv_context_attr may be longer in newer headers: checked below).
        "offsetof(struct mlx5dv_context_attr, comp_mask)" => offset_of!(Mlx5dvContextAttr, comp_mask),
        "sizeof(struct mlx5dv_devx_uar)" => size_of::<Mlx5dvDevxUar>(),
        "offsetof(struct mlx5dv_devx_uar, base_addr)" => offset_of!(Mlx5dvDevxUar, base_addr),
        "offsetof(struct mlx5dv_devx_uar, page_id)" => offset_of!(Mlx5dvDevxUar, page_id),
        "offsetof(struct mlx5dv_devx_uar, mmap_off)" => offset_of!(Mlx5dvDevxUar, mmap_off),
        "offsetof(struct mlx5dv_devx_uar, comp_mask)" => offset_of!(Mlx5dvDevxUar, comp_mask),
        "sizeof(struct mlx5dv_devx_umem)" => size_of::<Mlx5dvDevxUmem>(),
        "sizeof(struct mlx5dv_devx_umem_in)" => size_of::<Mlx5dvDevxUmemIn>(),
        "offsetof(struct mlx5dv_devx_umem_in, size)" => offset_of!(Mlx5dvDevxUmemIn, size),
        "offsetof(struct mlx5dv_devx_umem_in, access)" => offset_of!(Mlx5dvDevxUmemIn, access),
        "offsetof(struct mlx5dv_devx_umem_in, pgsz_bitmap)" => offset_of!(Mlx5dvDevxUmemIn, pgsz_bitmap),
        "offsetof(struct mlx5dv_devx_umem_in, comp_mask)" => offset_of!(Mlx5dvDevxUmemIn, comp_mask),
        "offsetof(struct mlx5dv_devx_umem_in, dmabuf_fd)" => offset_of!(Mlx5dvDevxUmemIn, dmabuf_fd),
        "sizeof(struct mlx5dv_pd)" => size_of::<Mlx5dvPd>(),
        "sizeof(struct mlx5dv_cq)" => size_of::<Mlx5dvCq>(),
        "offsetof(struct mlx5dv_cq, cqn)" => offset_of!(Mlx5dvCq, cqn),
        "sizeof(struct mlx5dv_srq)" => size_of::<Mlx5dvSrq>(),
        "offsetof(struct mlx5dv_srq, comp_mask)" => offset_of!(Mlx5dvSrq, comp_mask),
        "offsetof(struct mlx5dv_srq, srqn)" => offset_of!(Mlx5dvSrq, srqn),
        "sizeof(struct mlx5dv_ah)" => size_of::<Mlx5dvAh>(),
        "sizeof(struct mlx5_wqe_av)" => size_of::<Mlx5WqeAv>(),
        "offsetof(struct mlx5_wqe_av, rlid)" => offset_of!(Mlx5WqeAv, rlid),
        "offsetof(struct mlx5_wqe_av, rmac)" => offset_of!(Mlx5WqeAv, rmac),
        "offsetof(struct mlx5_wqe_av, rgid)" => offset_of!(Mlx5WqeAv, rgid),
        "sizeof(struct mlx5dv_obj)" => size_of::<Mlx5dvObj>(),
        "offsetof(struct mlx5dv_obj, cq.out)" => offset_of!(Mlx5dvObj, cq) + size_of::<*mut u8>(),
        "offsetof(struct mlx5dv_obj, srq.in)" => offset_of!(Mlx5dvObj, srq),
        "offsetof(struct mlx5dv_obj, ah.in)" => offset_of!(Mlx5dvObj, ah),
        "offsetof(struct mlx5dv_obj, pd.in)" => offset_of!(Mlx5dvObj, pd),
        // Constants.
        "IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC" => rshmem::transport::verbs::mr::ACCESS,
        "IBV_LINK_LAYER_INFINIBAND" => rshmem::transport::verbs::LinkLayer::InfiniBand.to_verbs(),
        "IBV_LINK_LAYER_ETHERNET" => rshmem::transport::verbs::LinkLayer::Ethernet.to_verbs(),
        "IBV_GID_TYPE_ROCE_V2" => IBV_GID_TYPE_ROCE_V2,
        "MLX5DV_CONTEXT_FLAGS_DEVX" => vs::MLX5DV_CONTEXT_FLAGS_DEVX,
        "MLX5DV_UMEM_MASK_DMABUF" => vs::MLX5DV_UMEM_MASK_DMABUF,
        "MLX5DV_SRQ_MASK_SRQN" => vs::MLX5DV_SRQ_MASK_SRQN,
        "MLX5DV_OBJ_CQ" => vs::obj::CQ,
        "MLX5DV_OBJ_SRQ" => vs::obj::SRQ,
        "MLX5DV_OBJ_AH" => vs::obj::AH,
        "MLX5DV_OBJ_PD" => vs::obj::PD,
        "MLX5DV_UAR_ALLOC_TYPE_BF" => vs::uar_alloc::BF,
        "MLX5DV_UAR_ALLOC_TYPE_NC" => vs::uar_alloc::NC,
    ]
}

/// The C program: prints each expression's value, one per line.
fn c_source(probes: &[(&str, u64)]) -> String {
    let mut s = String::from("#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n#include <infiniband/mlx5dv.h>\nint main(void) {\n");
    for (expr, _) in probes {
        s.push_str(&format!("    printf(\"%llu\\n\", (unsigned long long)({expr}));\n"));
    }
    s.push_str("    printf(\"%llu\\n\", (unsigned long long)sizeof(struct mlx5dv_context_attr));\n    return 0;\n}\n");
    s
}

#[test]
fn verbs_and_mlx5dv_layouts_match_the_system_headers() {
    let probes = probes();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("verbs_layout.c");
    let exe = dir.join("verbs_layout");
    std::fs::write(&src, c_source(&probes)).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc).args(["-O0", "-w", "-o"]).arg(&exe).arg(&src).output();
    match built {
        Ok(o) if o.status.success() => {}
        other => {
            let why = match &other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => format!("cannot run {cc}: {e}"),
            };
            let missing = other.is_err() || why.contains("verbs.h") || why.contains("mlx5dv.h");
            if missing {
                let first = why.lines().find(|l| l.contains("error")).unwrap_or(why.trim());
                return rshmem_test_support::skip(
                    "the verbs layout test",
                    &format!("rdma-core's headers (libibverbs-dev) or a C compiler ({cc}) are missing, which scripts/setup.sh installs: {first}"),
                );
            }
            panic!("building the layout probe failed:\n{why}");
        }
    }
    let out = Command::new(&exe).output().expect("run the layout probe");
    assert!(out.status.success());
    let values: Vec<u64> = String::from_utf8(out.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), probes.len() + 1);
    let wrong: Vec<String> = probes
        .iter()
        .zip(&values)
        .filter(|((_, rust), c)| rust != *c)
        .map(|((expr, rust), c)| format!("{expr}: the header says {c}, rshmem has {rust}"))
        .collect();
    assert!(wrong.is_empty(), "layouts differ from the system's headers:\n{}", wrong.join("\n"));
    // rshmem's mlx5dv_context_attr carries rdma-core v50's `fds` too: never smaller than the header's.
    assert!(size_of::<Mlx5dvContextAttr>() as u64 >= values[probes.len()]);
}
