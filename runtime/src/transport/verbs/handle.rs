//! What two PEs exchange to connect an RC QP (the bootstrap all-gather), and the path to the peer
//! derived from it: the same for the DevX QPs of IBGDA and the verbs QPs of the proxy.

use super::device::{LinkLayer, PortInfo};
use super::sys::Zeroed;
use bytemuck::{Pod, Zeroable};
use rdma_sys::ibv_ah_attr;

/// One RC QP's address, as peers exchange it: plain bytes (`bytemuck::Pod`), 24 bytes, the same on
/// every PE (native byte order: the PEs of a job share one architecture).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RcHandle {
    /// The QP's number.
    pub qpn: u32,
    /// The port's LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// `ibv_port_attr.link_layer` (1 InfiniBand, 2 Ethernet): both ends must match.
    pub link_layer: u8,
    /// The port's active MTU (`enum ibv_mtu`): the path uses the smaller of the two.
    pub mtu: u8,
    /// The GID the QP's traffic uses (RoCE: its source address; InfiniBand: the port GID).
    pub gid: [u8; 16],
}

const _: () = assert!(size_of::<RcHandle>() == 24);
const _: () = assert!(std::mem::offset_of!(RcHandle, gid) == 8);

impl RcHandle {
    /// The handle of QP `qpn` on `port`.
    pub fn new(qpn: u32, port: &PortInfo) -> RcHandle {
        RcHandle {
            qpn,
            lid: port.lid,
            link_layer: port.link_layer.to_verbs(),
            mtu: port.active_mtu,
            gid: port.gid.map_or([0; 16], |(_, g)| g),
        }
    }
}

/// Service level and traffic class of rshmem's RC traffic (NVSHMEM's `NVSHMEM_IB_SL` and
/// `NVSHMEM_IB_TRAFFIC_CLASS`; 0 by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// The service level (InfiniBand SL; on RoCE, the Ethernet priority).
    pub sl: u8,
    /// The traffic class (GRH; on RoCE its top six bits are the DSCP).
    pub tclass: u8,
}

/// The path from a local port to a peer's QP: what INIT2RTR needs besides the QPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemotePath {
    /// The local port's number.
    pub port: u8,
    /// The link layer both ports share.
    pub link_layer: LinkLayer,
    /// `enum ibv_mtu`: the smaller of the two ports' active MTUs.
    pub mtu: u8,
    /// The peer QP's number.
    pub remote_qpn: u32,
    /// InfiniBand: the peer's LID.
    pub rlid: u16,
    /// The peer's GID (RoCE destination).
    pub dgid: [u8; 16],
    /// This port's GID index (RoCE source).
    pub sgid_index: u8,
    /// This port's LID (RoCE v2 UDP source port: `0xC000 | lid`, as NVSHMEM).
    pub local_lid: u16,
    /// Service level and traffic class of the QP's packets.
    pub traffic: Traffic,
}

impl RemotePath {
    /// The path from `local` to the QP `remote` names; fails, saying why, when the two cannot talk
    /// (different link layers, an InfiniBand peer without a LID, no GID on a RoCE port).
    pub fn resolve(local: &PortInfo, remote: &RcHandle, traffic: Traffic) -> std::result::Result<RemotePath, String> {
        let remote_link = LinkLayer::from_verbs(remote.link_layer).map_err(|e| format!("the peer's handle: {e}"))?;
        if remote_link != local.link_layer {
            return Err(format!(
                "the peer's port is {} and this one {}: RC QPs connect ports of one fabric",
                remote_link.name(),
                local.link_layer.name()
            ));
        }
        if !(1..=5).contains(&remote.mtu) {
            return Err(format!("the peer's handle has no valid MTU ({})", remote.mtu));
        }
        let sgid_index = match (local.link_layer, local.gid) {
            (LinkLayer::Ethernet, None) => return Err("this RoCE port has no RoCE v2 GID (give its netdev an IP address)".into()),
            (LinkLayer::Ethernet, Some((i, _))) => i,
            (LinkLayer::InfiniBand, g) => g.map_or(0, |(i, _)| i),
        };
        match local.link_layer {
            LinkLayer::InfiniBand if remote.lid == 0 => return Err("the peer's InfiniBand port has no LID (is a subnet manager running?)".into()),
            LinkLayer::Ethernet if remote.gid == [0; 16] => return Err("the peer's RoCE port sent no GID".into()),
            _ => {}
        }
        Ok(RemotePath {
            port: local.num,
            link_layer: local.link_layer,
            mtu: local.active_mtu.min(remote.mtu),
            remote_qpn: remote.qpn,
            rlid: remote.lid,
            dgid: remote.gid,
            sgid_index,
            local_lid: local.lid,
            traffic,
        })
    }

    /// The address handle attributes for this path (`ibv_modify_qp` to RTR, and the AH from which a
    /// RoCE path's next-hop MAC is read): a GRH on RoCE, none on InfiniBand.
    pub fn ah_attr(&self) -> ibv_ah_attr {
        let mut a = ibv_ah_attr::zeroed();
        a.port_num = self.port;
        a.sl = self.traffic.sl;
        match self.link_layer {
            LinkLayer::InfiniBand => a.dlid = self.rlid,
            LinkLayer::Ethernet => {
                a.is_global = 1;
                a.grh.dgid = sys_gid(self.dgid);
                a.grh.sgid_index = self.sgid_index;
                a.grh.hop_limit = super::prm::value::HOP_LIMIT as u8;
                a.grh.traffic_class = self.traffic.tclass;
            }
        }
        a
    }

    /// The RoCE v2 UDP source port NVSHMEM uses: `0xC000 | lid`.
    pub fn udp_sport(&self) -> u16 {
        super::prm::value::ROCE_V2_UDP_SPORT_BASE | self.local_lid
    }
}

fn sys_gid(raw: [u8; 16]) -> rdma_sys::ibv_gid {
    let mut g = rdma_sys::ibv_gid::zeroed();
    g.raw = raw;
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdma_sys::ibv_port_state;

    fn port(link: LinkLayer, mtu: u8, lid: u16, gid: Option<(u8, [u8; 16])>) -> PortInfo {
        PortInfo { num: 1, state: ibv_port_state::IBV_PORT_ACTIVE, link_layer: link, active_mtu: mtu, lid, gid }
    }

    #[test]
    fn the_handle_is_24_plain_bytes() {
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[15] = 7;
        let h = RcHandle::new(0x12_3456, &port(LinkLayer::InfiniBand, 5, 0x2a, Some((0, gid))));
        let b = bytemuck::bytes_of(&h);
        assert_eq!(b.len(), 24);
        assert_eq!(&b[0..4], &0x12_3456u32.to_ne_bytes());
        assert_eq!(&b[4..6], &0x2au16.to_ne_bytes());
        assert_eq!((b[6], b[7]), (1, 5));
        assert_eq!(&b[8..24], &gid);
        // What the all-gather hands back parses into the same handle.
        let back: RcHandle = bytemuck::pod_read_unaligned(b);
        assert_eq!(back, h);
        let all: Vec<u8> = [h, RcHandle::default(), h].iter().flat_map(|h| bytemuck::bytes_of(h).to_vec()).collect();
        let handles: &[RcHandle] = bytemuck::cast_slice(&all);
        assert_eq!(handles[2], h);
    }

    #[test]
    fn paths_take_the_smaller_mtu_and_refuse_mismatches() {
        let mut v4 = [0u8; 16];
        v4[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 2]);
        let roce = port(LinkLayer::Ethernet, 5, 0, Some((3, v4)));
        let peer = RcHandle { qpn: 77, lid: 0, link_layer: 2, mtu: 3, gid: v4 };
        let p = RemotePath::resolve(&roce, &peer, Traffic { sl: 2, tclass: 0x68 }).unwrap();
        assert_eq!((p.mtu, p.remote_qpn, p.sgid_index, p.udp_sport()), (3, 77, 3, 0xc000));
        let a = p.ah_attr();
        // SAFETY: (test) reading the bytes of the GID union.
        assert_eq!((a.is_global, a.port_num, a.grh.sgid_index, a.grh.hop_limit, unsafe { a.grh.dgid.raw }), (1, 1, 3, 255, v4));
        assert_eq!((a.sl, a.grh.traffic_class), (2, 0x68));

        let ib = port(LinkLayer::InfiniBand, 4, 0x11, Some((0, v4)));
        let ib_peer = RcHandle { qpn: 5, lid: 0x22, link_layer: 1, mtu: 5, gid: v4 };
        let p = RemotePath::resolve(&ib, &ib_peer, Traffic::default()).unwrap();
        let a = p.ah_attr();
        assert_eq!((p.mtu, a.is_global, a.dlid), (4, 0, 0x22));

        let e = RemotePath::resolve(&ib, &peer, Traffic::default()).unwrap_err();
        assert!(e.contains("Ethernet") && e.contains("InfiniBand"), "{e}");
        let e = RemotePath::resolve(&ib, &RcHandle { lid: 0, ..ib_peer }, Traffic::default()).unwrap_err();
        assert!(e.contains("subnet manager"), "{e}");
        let e = RemotePath::resolve(&port(LinkLayer::Ethernet, 5, 0, None), &peer, Traffic::default()).unwrap_err();
        assert!(e.contains("RoCE v2 GID"), "{e}");
        let e = RemotePath::resolve(&roce, &RcHandle { gid: [0; 16], ..peer }, Traffic::default()).unwrap_err();
        assert!(e.contains("no GID"), "{e}");
        assert!(RemotePath::resolve(&roce, &RcHandle { mtu: 0, ..peer }, Traffic::default()).unwrap_err().contains("MTU"));
        assert!(RemotePath::resolve(&roce, &RcHandle { link_layer: 9, ..peer }, Traffic::default()).is_err());
    }
}
