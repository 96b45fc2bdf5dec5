#!/usr/bin/env python3
"""Writes the seed corpus of ietf_session_fuzzer into fuzz/corpus/ietf_session (replacing it).

The message bytes are @moq/net 0.3.4's own IETF encodings per draft, as
`cd tests/interop && node ietf_fixtures.mjs` prints them (the "JS" fixtures of
src/wire/ietf_test.cc), and the SUBGROUP streams of src/session/ietf_session_test.cc. Each seed
is the fuzzer's input format (see the header of ietf_session_fuzzer.cc): a config byte, then op
records. Run: python3 fuzz/ietf_session_seeds.py
"""
import os
import shutil

# name -> hex, per draft (node ietf_fixtures.mjs, request ids as @moq/net wrote them).
FIXTURES = {
    14: {
        "client_setup": "20001c01c0000000ff00000e02028000a455070b6d6f712d6c6974652d6a73",
        "subscribe": "030018020204726f6f6d05616c69636505766964656f0702010200",
        "subscribe_ok": "040006020200020000",
        "subscribe_error": "0500170241941342726f616463617374206e6f7420666f756e64",
        "unsubscribe": "0a000102",
        "subscribe_update": "0200080400000000800100",
        "publish_namespace": "06000e000204726f6f6d05616c69636500",
        "publish_namespace_ok": "07000100",
        "publish_namespace_done": "09000c0204726f6f6d05616c696365",
        "subscribe_namespace": "110008000104726f6f6d00",
        "max_request_id": "1500024064",
        "goaway": "10001a1968747470733a2f2f72656c61792e6578616d706c652f6d6f71",
        "publish_done": "0b00070240c800024f4b",
    },
    15: {
        "client_setup": "20001302028000a455070b6d6f712d6c6974652d6a73",
        "subscribe": "03001d020204726f6f6d05616c69636505766964656f04200722021001210102",
        "subscribe_ok": "040003020200",
        "subscribe_error": "0500170241941342726f616463617374206e6f7420666f756e64",
        "unsubscribe": "0a000102",
        "subscribe_update": "020003040000",
        "publish_namespace": "06000e000204726f6f6d05616c69636500",
        "publish_namespace_ok": "0700020000",
        "publish_namespace_done": "09000c0204726f6f6d05616c696365",
        "subscribe_namespace": "110008000104726f6f6d00",
        "max_request_id": "1500024064",
        "goaway": "10001a1968747470733a2f2f72656c61792e6578616d706c652f6d6f71",
        "publish_done": "0b00070240c800024f4b",
        "namespace": "0800070105616c696365",
        "namespace_done": "0e00070105616c696365",
    },
    16: {
        "client_setup": "20001302028000a455050b6d6f712d6c6974652d6a73",
        "subscribe": "03001d020204726f6f6d05616c69636505766964656f04100110070101020102",
        "subscribe_ok": "040003020200",
        "subscribe_error": "050018024194001342726f616463617374206e6f7420666f756e64",
        "unsubscribe": "0a000102",
        "subscribe_update": "020003040000",
        "publish_namespace": "06000e000204726f6f6d05616c69636500",
        "publish_namespace_ok": "0700020000",
        "publish_namespace_done": "09000100",
        "subscribe_namespace": "110009000104726f6f6d0100",
        "max_request_id": "1500024064",
        "goaway": "10001a1968747470733a2f2f72656c61792e6578616d706c652f6d6f71",
        "publish_done": "0b00070240c800024f4b",
        "namespace": "0800070105616c696365",
        "namespace_done": "0e00070105616c696365",
    },
}
DRAFT_BITS = {14: 0, 15: 1, 16: 2, 17: 3, 18: 0x20, 19: 0x21, 20: 0x22}
SETUP = 4  # config: the fuzzer sends a valid CLIENT_SETUP first
LOCAL = 8  # config: the local broadcast room/alice is announced
TIGHT = 0x10  # config: tight SessionLimits

# SUBGROUP streams (ietf_session_test.cc): alias 9 group 4 objects "abc", "", "z"; a gap in ids.
SUBGROUP = "18090400" "0003616263" "000000" "00017a"
SUBGROUP_GAP = "18090500000161010162"
# PUBLISH id 0 ["room","alice"] "video" alias 9, per draft (d14 §9.13 fields; d15/16 FORWARD 1).
PUBLISH = {
    14: "1d001a000204726f6f6d05616c69636505766964656f090201030101 00",
    15: "1d0017000204726f6f6d05616c69636505766964656f09011001",
    16: "1d0017000204726f6f6d05616c69636505766964656f09011001",
}
# OBJECT_DATAGRAMs under alias 9: a one-object group 7 (0x06), then object 0 of group 8 (0x04).
DATAGRAMS = ["0609078061", "0409088062"]


def h(s):
    return bytes.fromhex(s.replace(" ", ""))


def with_id(msg, request_id):
    """The message with its one-byte request id (after type and 16-bit length) replaced."""
    b = bytearray(h(msg))
    b[3] = request_id
    return bytes(b)


def with_alias(msg, alias):
    """SUBSCRIBE_OK with its one-byte track alias (after the request id) replaced."""
    b = bytearray(msg)
    b[4] = alias
    return bytes(b)


def control(data):
    out = b""
    for i in range(0, len(data), 255):
        chunk = data[i:i + 255]
        out += bytes([0, len(chunk)]) + chunk
    return out


def uni(data, fin=True):
    return bytes([0x11 if fin else 0x01, len(data)]) + data


def seeds(draft):
    f = {k: h(v) for k, v in FIXTURES[draft].items()}
    d = DRAFT_BITS[draft]
    out = {}
    # The whole control stream from the peer, CLIENT_SETUP included, in one record and bytewise.
    out["raw_setup"] = bytes([d]) + control(f["client_setup"])
    out["raw_setup_split"] = bytes([d]) + b"".join(control(f["client_setup"][i:i + 1])
                                                   for i in range(len(f["client_setup"])))
    # Every fixture message alone after SETUP, its request id the first the peer may use.
    for name, msg in f.items():
        if name == "client_setup":
            continue
        body = with_id(FIXTURES[draft][name], 0) if name in ("subscribe", "publish_namespace") else msg
        out["msg_" + name] = bytes([d | SETUP | LOCAL]) + control(body)
    # Publisher flow: PUBLISH_NAMESPACE, the viewer subscribes (relay SUBSCRIBE id 1), SUBSCRIBE_OK
    # id 1 alias 9, a SUBGROUP stream, a stream with a gap, PUBLISH_DONE.
    ok = with_alias(with_id(FIXTURES[draft]["subscribe_ok"], 1), 9)
    done = with_id(FIXTURES[draft]["publish_done"], 1)
    pub = control(f["publish_namespace"]) + bytes([0x08, 0x00]) + control(ok)
    out["publish_flow"] = (bytes([d | SETUP]) + pub + uni(h(SUBGROUP)) + uni(h(SUBGROUP_GAP)) +
                           control(done))
    # The SUBGROUP stream before its SUBSCRIBE_OK (held), then split across records.
    out["publish_early_stream"] = (bytes([d | SETUP]) + control(f["publish_namespace"]) +
                                   bytes([0x08, 0x00]) + uni(h(SUBGROUP)[:5], fin=False) +
                                   control(ok) + bytes([0x02, 0x01, len(h(SUBGROUP)) - 5]) + h(SUBGROUP)[5:] +
                                   bytes([0x03, 0x01]))
    # PUBLISH flow: PUBLISH id 0 of room/alice video under alias 9 (d14 fields, d15/16 FORWARD
    # parameter; src/wire/ietf_publish_test.cc), the viewer subscribes, a SUBGROUP stream and two
    # OBJECT_DATAGRAMs under alias 9 (src/wire/ietf_datagram_test.cc), then PUBLISH_DONE id 0.
    publish = h(PUBLISH[draft])
    dgrams = b"".join(bytes([0x0c, len(h(x))]) + h(x) for x in DATAGRAMS)
    out["publish_own_flow"] = (bytes([d | SETUP]) + control(publish) + bytes([0x08, 0x00]) +
                               uni(h(SUBGROUP)) + dgrams +
                               control(with_id(FIXTURES[draft]["publish_done"], 0)))
    # Subscriber flow: SUBSCRIBE id 0 for room/alice video, three groups (one left open), the
    # network drains, STOP_SENDING on a group stream, UNSUBSCRIBE, then GOAWAY and a clock step.
    sub = with_id(FIXTURES[draft]["subscribe"], 0)
    unsub = with_id(FIXTURES[draft]["unsubscribe"], 0)
    out["subscribe_flow"] = (bytes([d | SETUP | LOCAL]) + control(sub) + bytes([0x09, 3, 0x09, 0]) +
                             bytes([0x07, 0x19, 2, 0x05, 0, 5]) + control(unsub) +
                             bytes([0x0d, 0x06, 200]))
    # Namespace discovery: SUBSCRIBE_NAMESPACE "room" (on the control stream; d16 also on its own
    # bidi stream), then the local broadcast ends.
    ns = f["subscribe_namespace"]
    if draft == 16:
        out["namespace_flow"] = (bytes([d | SETUP | LOCAL, 0x0a, len(ns)]) + ns + bytes([0x0f]))
    else:
        out["namespace_flow"] = bytes([d | SETUP | LOCAL]) + control(ns) + bytes([0x0f])
    # Limits: two PUBLISH_NAMESPACEs and requests past MAX_REQUEST_ID under tight limits.
    pn2 = with_id(FIXTURES[draft]["publish_namespace"], 2)
    out["tight_limits"] = (bytes([d | SETUP | LOCAL | TIGHT]) + control(f["publish_namespace"]) +
                           control(pn2) + control(with_id(FIXTURES[draft]["subscribe"], 4)))
    # The setup timer and the peer closing mid-stream.
    out["no_setup_timeout"] = bytes([d]) + bytes([0x06, 255] * 40)
    out["peer_close"] = bytes([d | SETUP]) + control(f["publish_namespace"][:7]) + bytes([0x0e, 3])
    return out


NS_TRACK = "02 04 726f6f6d 05 616c696365 05 766964656f"  # ("room", "alice") "video"


def msg(type_, body_hex):
    body = h(body_hex)
    return bytes([type_, len(body) >> 8, len(body) & 0xff]) + body


def bidi(data):
    """Op 10: the peer opens a bidi stream with `data` (a request stream from 17)."""
    return bytes([0x0a, len(data)]) + data


def request_stream_seeds(draft):
    """Drafts 17..20: SETUP on a uni stream (config SETUP), then each request on its own bidi
    stream: SUBSCRIBE, standalone and joining FETCH, TRACK_STATUS, REQUEST_UPDATE, the FETCH
    cancelled, as src/session/ietf_fetch_test.cc sends them."""
    d = DRAFT_BITS[draft]
    rid = (lambda v: "%02x 00" % v) if draft == 17 else (lambda v: "%02x" % v)
    d20 = draft == 20
    sub = lambda v: msg(0x03, rid(v) + " " + NS_TRACK + " 04 10 01 10 07 01 01 " +
                        ("01" if d20 else "02") + " 01 02")
    if d20:
        fetch = msg(0x16, rid(2) + " 01 " + NS_TRACK + " 02 21 04 00 00 02 00 01 02")  # descending
        joining = msg(0x16, rid(4) + " 02 00 01 21 01 02")
    else:
        fetch = msg(0x16, rid(2) + " 01 " + NS_TRACK + " 00 00 02 00 01 22 02")
        joining = msg(0x16, rid(4) + " 02 00 01 00")
    status = msg(0x0d, rid(6) + " " + NS_TRACK + " 00")
    update = msg(0x02, rid(8) + (" 02 20 09 01 03 01 00 01" if d20 else " 02 20 09 01 04 04 01 00 01"))
    out = {}
    base = bytes([d | SETUP | LOCAL])
    # Peer streams: 0 SETUP (uni), 1 SUBSCRIBE, 2 FETCH, 3 joining FETCH, 4 TRACK_STATUS.
    out["fetch_flow"] = (base + bidi(sub(0)) + bytes([0x09, 3, 0x09, 2]) + bidi(fetch) +
                         bidi(joining) + bidi(status) + bytes([0x02, 1, len(update)]) + update +
                         bytes([0x09, 4, 0x07]))
    # A FETCH of a group still arriving, then cancelled (RESET and STOP_SENDING on its stream).
    out["fetch_cancel"] = (base + bidi(sub(0)) + bytes([0x19, 3]) + bidi(fetch) +
                           bytes([0x04, 2, 1, 0x05, 1, 1, 0x09, 1]))
    # Each message alone, and split across records.
    for name, m in (("fetch", fetch), ("joining", joining), ("track_status", status)):
        out["msg_" + name] = base + bidi(m)
        out["split_" + name] = base + bytes([0x0a, 1]) + m[:1] + b"".join(
            bytes([0x02, 1, 1]) + m[i:i + 1] for i in range(1, len(m)))
    out["raw_setup"] = bytes([d]) + uni(h(SETUPS[draft]), fin=False)
    # PUBLISH_NAMESPACE room/alice on its own stream, the viewer subscribes (the relay's SUBSCRIBE
    # goes upstream, unanswered), then OBJECT_DATAGRAMs of drafts 17..20
    # (src/wire/ietf_datagram_test.cc Draft17To20): decoded, dropped for want of an alias; the last
    # one's properties on an End of Group status close the session.
    pn = msg(0x06, rid(0) + " 02 04 726f6f6d 05 616c696365 00")
    dgrams = b"".join(bytes([0x0c, len(h(x))]) + h(x) for x in DATAGRAMS_17 + ["25 09 66 80 02 10 05 03"])
    out["datagram_flow"] = bytes([d | SETUP]) + bidi(pn) + bytes([0x08, 0x00]) + dgrams
    # PUBLISH of room/alice video under alias 9 on its own stream (peer stream 1;
    # src/session/ietf_publish_test.cc PublishRequestStreamTest), the viewer subscribes, a SUBGROUP
    # stream, then PUBLISH_DONE (TRACK_ENDED, Stream Count 2) and FIN on the PUBLISH stream; and the
    # same stream closed with no PUBLISH_DONE, then 1 s.
    publish = msg(0x1d, rid(0) + " " + NS_TRACK + " 09 01 10 01")
    done = msg(0x0b, "02 02 00")
    start = bytes([d | SETUP]) + bidi(publish) + bytes([0x08, 0x00]) + uni(h(SUBGROUP))
    out["publish_flow"] = start + bytes([0x02, 1, len(done)]) + done + bytes([0x03, 1])
    out["publish_closed"] = start + bytes([0x03, 1, 0x06, 100])
    return out


# OBJECT_DATAGRAMs of drafts 17..20 under alias 9: object 0 of group 100 (one leading-ones byte),
# its End of Group status at object 1, a one-object group 101 with a timestamp property.
DATAGRAMS_17 = ["0c 09 64 6869", "20 09 64 01 80 03", "0f 09 65 02 10 05 7a"]


# d17+ SETUP (ietf_session_fuzzer.cc kDrafts): 18 and 20 as @moq/net 0.3.4 writes it.
NET_SETUP = "af00001b070b6d6f712d6c6974652d6a73c40b4e08fe0a5a2adb5a87d40501"
SETUPS = {17: "af000000", 18: NET_SETUP, 19: "af000000", 20: NET_SETUP}

# FETCH on the control stream (d16 §9.16, src/session/ietf_fetch_test.cc): after a SUBSCRIBE,
# a standalone FETCH of groups 0..2 (request 2), then FETCH_CANCEL.
D16_FETCH = "16 00 19 02 01 " + NS_TRACK + " 00 00 02 00 00"
D16_CANCEL = "17 00 01 02"


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "ietf_session")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    n = 0
    all_seeds = [(draft, seeds(draft)) for draft in (14, 15, 16)]
    all_seeds += [(draft, request_stream_seeds(draft)) for draft in (17, 18, 19, 20)]
    all_seeds[2][1]["fetch_flow"] = (bytes([DRAFT_BITS[16] | SETUP | LOCAL]) +
                                     control(with_id(FIXTURES[16]["subscribe"], 0)) +
                                     bytes([0x09, 3]) + control(h(D16_FETCH)) +
                                     control(h(D16_CANCEL)))
    for draft, drafted in all_seeds:
        for name, data in drafted.items():
            with open(os.path.join(root, f"d{draft}_{name}"), "wb") as fh:
                fh.write(data)
            n += 1
    print(f"{n} seeds in {root}")


if __name__ == "__main__":
    main()
