#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""remu_wire.py - RoCEv2 packet tools for remu_wire_test.sh (run in the VM).

  rxe-send DEV SGID_INDEX DGID [ud|rc]
        make upstream rxe transmit real RoCEv2 packets to DGID with no peer
        QP: UD SENDs of several sizes to a made-up QPN, and RC requests
        (multi-packet WRITE, SEND with immediate, READ, atomic) on an RC QP
        connected to a made-up QPN, which rxe sends and retransmits until
        its retry count runs out.
  capture IFACE OUTFILE
        count RoCEv2 frames (UDP dport 4791) arriving on IFACE until
        SIGTERM; verify each one's ICRC with this file's own implementation
        (so rxe's packets cross-check it) and write "N ICRC_OK OPCODES...".
  send CASE SRC DST
        send one crafted datagram (valid or hostile, see CASES) from SRC to
        DST:4791 with an ordinary UDP socket; the ICRC is computed over the
        IP/UDP headers the kernel will build (unconnected socket with DF:
        IP ID 0).
"""
import signal
import socket
import struct
import sys
import time
import zlib

ROCE_PORT = 4791


def icrc(frame_ip):
    """ICRC over IP header .. end of payload+pad (the ICRC not included)."""
    b = bytearray(frame_ip)
    if b[0] >> 4 == 4:
        iplen = (b[0] & 0xf) * 4
        b[1] = 0xff                     # TOS
        b[8] = 0xff                     # TTL
        b[10:12] = b'\xff\xff'          # header checksum
    else:
        iplen = 40
        b[0] |= 0x0f                    # traffic class (high nibble)
        b[1:4] = b'\xff\xff\xff'        # traffic class (low), flow label
        b[7] = 0xff                     # hop limit
    b[iplen + 6:iplen + 8] = b'\xff\xff'    # UDP checksum
    b[iplen + 8 + 4] = 0xff                 # BTH resv8a: FECN, BECN, resv6a
    # CRC-32 seeded with 1s over 8 bytes of 1s (the masked LRH) + the rest;
    # zlib's final inversion is the ICRC's inversion
    return struct.pack('<I', zlib.crc32(b'\xff' * 8 + bytes(b)))


def bth(opcode, qpn, psn, pad=0, tver=0, pkey=0xffff, se=0, ackreq=0):
    return struct.pack('>BBHII', opcode, (se << 7) | (pad << 4) | tver, pkey,
                       qpn & 0xffffff, (ackreq << 31) | (psn & 0xffffff))


def deth(qkey=0x11111111, sqp=0x12):
    return struct.pack('>II', qkey, sqp)


# name -> (transport bytes after UDP without ICRC, corrupt the ICRC?, IP options)
def cases():
    ud = 0x64       # UD_SEND_ONLY
    return {
        'valid_ud': (bth(ud, 0x77, 1, pad=3) + deth() + b'hello' + b'\0' * 3,
                     False, None),
        'valid_ack': (bth(0x11, 0x77, 5) + struct.pack('>I', 0x1f000001),
                      False, None),
        'too_short': (b'\x64\x00\xff\xff\x00\x00\x00\x77', False, None),
        'bad_icrc': (bth(ud, 0x77, 1) + deth() + b'abcd', True, None),
        'bad_version': (bth(ud, 0x77, 1, tver=1) + deth() + b'abcd',
                        False, None),
        'unknown_opcode': (bth(0x15, 0x77, 1) + b'abcd', False, None),
        'rd_opcode': (bth(0x44, 0x77, 1) + b'\0' * 16 + b'abcd', False, None),
        'cnp_opcode': (bth(0x81, 0x77, 1) + b'\0' * 16, False, None),
        'xrc_opcode': (bth(0xa4, 0x77, 1) + b'\0' * 4 + b'abcd', False, None),
        'truncated_reth': (bth(0x0a, 0x77, 1) + b'\0' * 8, False, None),
        'truncated_deth': (bth(ud, 0x77, 1) + b'\0' * 4, False, None),
        'huge_pad': (bth(ud, 0x77, 1, pad=3) + deth(), False, None),
        'unaligned_payload': (bth(ud, 0x77, 1) + deth() + b'abcde',
                              False, None),
        'ack_with_payload': (bth(0x11, 0x77, 5) + struct.pack('>I', 0) +
                             b'abcd', False, None),
        'bad_pkey': (bth(ud, 0x77, 1, pkey=0x1234) + deth() + b'abcd',
                     False, None),
        'ip_options': (bth(ud, 0x77, 1) + deth() + b'abcd', False,
                       b'\x01\x01\x01\x00'),
    }


def cmd_send(name, src, dst):
    payload, corrupt, ipopts = cases()[name]
    v6 = ':' in dst
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((src, 0))
    sport = s.getsockname()[1]
    ulen = 8 + len(payload) + 4
    if v6:
        iph = struct.pack('>IHBB', 6 << 28, ulen, 17, 64) + \
            socket.inet_pton(fam, src) + socket.inet_pton(fam, dst)
    else:
        # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF set, so an unconnected
        # socket's packets carry IP ID 0
        s.setsockopt(socket.IPPROTO_IP, 10, 2)
        if ipopts:
            s.setsockopt(socket.IPPROTO_IP, 4, ipopts)     # IP_OPTIONS
        opts = ipopts or b''
        iph = struct.pack('>BBHHHBBH', 0x45 + len(opts) // 4, 0,
                          20 + len(opts) + ulen, 0, 0x4000, 64, 17, 0) + \
            socket.inet_aton(src) + socket.inet_aton(dst) + opts
    udph = struct.pack('>HHHH', sport, ROCE_PORT, ulen, 0)
    crc = icrc(iph + udph + payload)
    if corrupt:
        crc = bytes(x ^ 0x5a for x in crc)
    s.sendto(payload + crc, (dst, ROCE_PORT))
    s.close()


def cmd_capture(iface, out):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    s.settimeout(0.2)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    n = ok = 0
    ops = {}
    with open(out + '.ready', 'w'):
        pass
    while not stop:
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        etype = struct.unpack('>H', frame[12:14])[0]
        ip = frame[14:]
        if etype == 0x0800 and ip[9] == 17:
            iplen = (ip[0] & 0xf) * 4
            ip = ip[:struct.unpack('>H', ip[2:4])[0]]
        elif etype == 0x86dd and ip[6] == 17:
            iplen = 40
            ip = ip[:40 + struct.unpack('>H', ip[4:6])[0]]
        else:
            continue
        if struct.unpack('>H', ip[iplen + 2:iplen + 4])[0] != ROCE_PORT:
            continue
        n += 1
        op = ip[iplen + 8]
        ops[op] = ops.get(op, 0) + 1
        if icrc(ip[:-4]) == ip[-4:]:
            ok += 1
    with open(out, 'w') as f:
        f.write('%d %d %s\n' % (n, ok, ' '.join('0x%02x:%d' % kv for kv in
                                                 sorted(ops.items()))))


def cmd_rxe_send(dev, sgid_index, dgid, what):
    import pyverbs.enums as e
    from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
    from pyverbs.wr import SGE, SendWR

    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 64)
    mr = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE)
    mr.write(bytes(range(256)) * 32, 8192)
    gr = GlobalRoute(dgid=GID(dgid), sgid_index=sgid_index, hop_limit=64)
    ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    cap = QPCap(max_send_wr=16, max_recv_wr=1, max_send_sge=1,
                max_recv_sge=1)

    def wr(wr_id, opcode, length, imm=0, off=0):
        return SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, imm_data=imm,
                      sg=[SGE(mr.buf + off, length, mr.lkey)])

    def wait(count, seconds=20):
        done, status = 0, []
        end = time.time() + seconds
        while done < count and time.time() < end:
            n, wcs = cq.poll(count - done)
            done += n
            status += [wc.status for wc in wcs]
            if not n:
                time.sleep(0.01)
        if done < count:
            sys.exit('%s: only %d of %d completions' % (dev, done, count))
        return status

    if what == 'ud':
        qa = QPAttr()
        qa.qkey = 0x11111111
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                               cap=cap), qa)
        ah = AH(pd, attr=ah_attr)
        sizes = [(0, e.IBV_WR_SEND), (1, e.IBV_WR_SEND),
                 (7, e.IBV_WR_SEND), (1000, e.IBV_WR_SEND),
                 (13, e.IBV_WR_SEND_WITH_IMM)]
        for i, (n, op) in enumerate(sizes):
            w = wr(i, op, n, imm=0x12345678)
            w.set_wr_ud(ah, 0x77, 0x11111111)
            qp.post_send(w)
        st = wait(len(sizes))
        if any(s != e.IBV_WC_SUCCESS for s in st):
            sys.exit('UD send completions: %s' % st)
        print('%s: %d UD sends completed' % (dev, len(sizes)))
        return

    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    qa = QPAttr(port_num=1, path_mtu=e.IBV_MTU_1024)
    qa.qp_access_flags = 0
    qa.dest_qp_num = 0x5a5a
    qa.rq_psn = 0
    qa.sq_psn = 100
    qa.max_dest_rd_atomic = 1
    qa.max_rd_atomic = 4
    qa.min_rnr_timer = 1
    qa.timeout = 12         # 16.8 ms
    qa.retry_cnt = 1
    qa.rnr_retry = 0
    qa.ah_attr = ah_attr
    qp.to_rts(qa)
    wrs = [wr(1, e.IBV_WR_RDMA_WRITE, 3000), wr(2, e.IBV_WR_SEND_WITH_IMM, 5),
           wr(3, e.IBV_WR_RDMA_READ, 100), wr(4, e.IBV_WR_ATOMIC_CMP_AND_SWP, 8,
                                           off=4096),
           wr(5, e.IBV_WR_SEND, 2)]
    wrs[0].set_wr_rdma(0x1234, 0x10000)
    wrs[2].set_wr_rdma(0x1234, 0x20000)
    wrs[3].set_wr_atomic(0x1234, 0x30000, 1, 2)
    for w in wrs:
        qp.post_send(w)
    st = wait(len(wrs))
    print('%s: RC requests ended with statuses %s (no responder exists)' %
          (dev, st))


def main():
    a = sys.argv[1:]
    if a[:1] == ['rxe-send'] and len(a) == 5:
        cmd_rxe_send(a[1], int(a[2]), a[3], a[4])
    elif a[:1] == ['capture'] and len(a) == 3:
        cmd_capture(a[1], a[2])
    elif a[:1] == ['send'] and len(a) == 4:
        cmd_send(a[1], a[2], a[3])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
