// Port: FIFO serialization, tail drop against a per-class buffer, and the
// buffer account that Send settles lazily.
#include "fabric/sim/port.h"

#include <gtest/gtest.h>

#include <vector>

namespace fathom::sim {
namespace {

struct Sink {
  PacketPool* pool;
  std::vector<int64_t> arrivals;
  Engine* engine;
  std::vector<int> hops;  // of each packet received, in order
  std::vector<uint32_t> psns;
  static void Receive(void* obj, Packet* p, int32_t) {
    auto* s = static_cast<Sink*>(obj);
    s->arrivals.push_back(s->engine->Now().ps());
    s->hops.push_back(p->hops);
    s->psns.push_back(p->psn);
    s->pool->Free(p);
  }
};

// 10 Gb/s: 800 ps a byte; frames of 1000 wire bytes take 800 ns each.
struct PortRig {
  Engine engine;
  PacketPool pool;
  HugePageArena arena;
  DropStats drops;
  Port tx;
  Port rx;
  Sink sink{&pool, {}, &engine};
  // `full`: the packets are full-size packets of their flow (IsFullSize),
  // which the ports hold as compact entries; otherwise as pool packets.
  explicit PortRig(int64_t buffer_bytes, bool full = false)
      : tx(&engine, &pool, &arena, &drops, Config(0, buffer_bytes)),
        rx(&engine, &pool, &arena, &drops, Config(1, 0)) {
    tx.Connect(&rx, &Sink::Receive, &sink);
    rx.Connect(&tx, &Sink::Receive, &sink);
    if (full) flow.full_wire_bytes = 1000;
  }
  static PortConfig Config(int node, int64_t buffer_bytes) {
    PortConfig c;
    c.node = node;
    c.index = 0;
    c.rate = BitsPerSecond::Gbps(10);
    c.latency = Picoseconds(1000);
    c.buffer_bytes = buffer_bytes;
    return c;
  }
  void Send() {
    Packet* p = pool.Alloc();
    p->flow = &flow;
    p->wire_bytes = 1000;
    tx.Send(p);
  }
  QpFlow flow;  // no route: the far end's receiver gets each packet
};

// Each test of this suite runs with pool packets and with compact entries
// (full-size packets): the two must behave alike.
class PortFormTest : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Forms, PortFormTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "compact" : "pooled"; });

TEST_P(PortFormTest, BufferAccountCountsOnlyWhatIsNotYetSerialized) {
  PortRig rig(3000, GetParam());
  for (int i = 0; i < 3; ++i) rig.Send();
  EXPECT_EQ(rig.tx.queued_bytes(0), 3000);
  // A fourth does not fit while all three are queued.
  rig.Send();
  EXPECT_EQ(rig.tx.counters().port_xmit_discards, 1u);
  // After the first finished serializing (800 ns) the account, read without
  // a Send to settle it, shows two; a Send then fits.
  rig.engine.Run(Picoseconds(900000));
  EXPECT_EQ(rig.tx.queued_bytes(0), 2000);
  rig.Send();
  EXPECT_EQ(rig.tx.counters().port_xmit_discards, 1u);
  EXPECT_EQ(rig.tx.queued_bytes(0), 3000);
  rig.engine.Run();
  EXPECT_EQ(rig.tx.queued_bytes(0), 0);
  // FIFO at line rate: arrivals 800 ns apart (plus 1 ns of cable); the one
  // sent at 900 ns waits behind the two before it.
  EXPECT_EQ(rig.sink.arrivals, (std::vector<int64_t>{801000, 1601000, 2401000, 3201000}));
  EXPECT_EQ(rig.tx.counters().port_xmit_packets, 4u);
  EXPECT_EQ(rig.rx.counters().port_rcv_packets, 4u);
  EXPECT_EQ(rig.drops.by_reason[static_cast<size_t>(DropReason::kTailDrop)], 1u);
  EXPECT_EQ(rig.pool.in_use(), 0u);
}

TEST_P(PortFormTest, UnbufferedPortKeepsNoAccountAndDropsNothing) {
  PortRig rig(0, GetParam());
  for (int i = 0; i < 50; ++i) rig.Send();
  EXPECT_EQ(rig.tx.queued_bytes(0), 0);
  rig.engine.Run();
  EXPECT_EQ(rig.sink.arrivals.size(), 50u);
  EXPECT_EQ(rig.tx.counters().port_xmit_discards, 0u);
}

// A fault model that gives the n-th packet the n-th verdict of its script,
// and passes the packets after the script.
struct ScriptedFaults {
  std::vector<ImpairmentVerdict> script;
  size_t seen = 0;
  static ImpairmentVerdict Decide(void* ctx, const Packet&, uint32_t, Picoseconds) {
    auto* f = static_cast<ScriptedFaults*>(ctx);
    const size_t n = f->seen++;
    return n < f->script.size() ? f->script[n] : ImpairmentVerdict{};
  }
  Impairment hook() { return Impairment{&ScriptedFaults::Decide, this}; }
};

// The far end's rcv counters are derived from what was sent; they must
// count exactly what arrived, also mid-run and with the wire's faults: a
// packet lost, one corrupted (counted as an error), one delayed so that the
// next overtakes it (the delayed one travels outside the ring).
TEST(PortTest, ReceiveCountersCountWhatArrivedAndNothingInFlight) {
  PortRig rig(0);
  ScriptedFaults faults{{{},
                         {ImpairmentVerdict::kDrop, {}},
                         {ImpairmentVerdict::kCorrupt, {}},
                         {ImpairmentVerdict::kDelay, Picoseconds(1500000)}}};
  const Impairment hook = faults.hook();
  rig.tx.set_impairment(&hook);
  for (int i = 0; i < 6; ++i) rig.Send();
  // Frames end serializing every 800 ns and arrive 1 ns later: the 1st at
  // 801 ns, the 3rd (corrupted) at 2,401, the 4th (delayed) at 4,701, the
  // 5th on its own at 4,001, the 6th at 4,801.
  auto rcv = [&] { return rig.rx.counters(); };
  EXPECT_EQ(rcv().port_rcv_packets, 0u);
  rig.engine.Run(Picoseconds(801000));
  EXPECT_EQ(rcv().port_rcv_packets, 1u);
  EXPECT_EQ(rcv().port_rcv_data, 980u);
  rig.engine.Run(Picoseconds(3000000));  // the 5th is on its way alone
  EXPECT_EQ(rcv().port_rcv_packets, 2u);
  EXPECT_EQ(rcv().port_rcv_errors, 1u);
  rig.engine.Run(Picoseconds(4001000));
  EXPECT_EQ(rcv().port_rcv_packets, 3u);
  EXPECT_EQ(rcv().port_rcv_data, 3 * 980u);
  rig.engine.Run();
  EXPECT_EQ(rcv().port_rcv_packets, 5u);
  EXPECT_EQ(rcv().port_rcv_data, 5 * 980u);
  EXPECT_EQ(rcv().port_rcv_errors, 1u);
  EXPECT_EQ(rig.tx.counters().port_xmit_packets, 6u);
  EXPECT_EQ(rig.sink.arrivals, (std::vector<int64_t>{801000, 4001000, 4701000, 4801000}));
}

// A packet lost on the wire or delayed by a fault still took its turn at the
// serializer: it holds its buffer space until its last bit is out, no
// longer (its size and class come from the packet, which the ring keeps
// until then), and the lost one goes back to the pool.
TEST(PortTest, LostAndDelayedPacketsHoldTheBufferUntilSerialized) {
  PortRig rig(3000);
  ScriptedFaults faults{
      {{ImpairmentVerdict::kDrop, {}}, {ImpairmentVerdict::kDelay, Picoseconds(5000000)}}};
  const Impairment hook = faults.hook();
  rig.tx.set_impairment(&hook);
  for (int i = 0; i < 3; ++i) rig.Send();
  EXPECT_EQ(rig.tx.queued_bytes(0), 3000);
  rig.Send();  // full: the lost and the delayed one count until serialized
  EXPECT_EQ(rig.tx.counters().port_xmit_discards, 1u);
  EXPECT_EQ(rig.pool.in_use(), 3u);
  // The lost one ends at 800 ns, the delayed one at 1,600 ns (it arrives at
  // 6,601 ns), the third at 2,400 ns.
  rig.engine.Run(Picoseconds(900000));
  EXPECT_EQ(rig.tx.queued_bytes(0), 2000);
  EXPECT_EQ(rig.pool.in_use(), 2u);  // the lost one is freed at its turn (801 ns)
  rig.engine.Run(Picoseconds(1700000));
  EXPECT_EQ(rig.tx.queued_bytes(0), 1000);
  rig.Send();  // settles the account: two fit now
  rig.Send();
  EXPECT_EQ(rig.tx.counters().port_xmit_discards, 1u);
  EXPECT_EQ(rig.tx.queued_bytes(0), 3000);
  rig.engine.Run();
  EXPECT_EQ(rig.tx.queued_bytes(0), 0);
  EXPECT_EQ(rig.pool.in_use(), 0u);
  EXPECT_EQ(rig.sink.arrivals, (std::vector<int64_t>{2401000, 3201000, 4001000, 6601000}));
  EXPECT_EQ(rig.rx.counters().port_rcv_packets, 4u);
  EXPECT_EQ(rig.rx.counters().port_rcv_data, 4 * 980u);
}

// A packet with a path crosses a forwarding far end without its receiver:
// the port its path names there sends it on, and the packet reaches the
// last receiver with its hop count, fields and timing as if forwarded by
// hand. A packet without a path goes to the forwarding end's receiver.
// Two links in a row: `first` (node 0 to 1) ends at a forwarding node whose
// `second` port (node 1 to 2) goes on to `last`; `middle` receives at node 1
// what the route does not carry on.
struct TwoLinks {
  Engine engine;
  PacketPool pool;
  HugePageArena arena;
  DropStats drops;
  Port first;
  Port back;
  Port second;
  Port second_back;
  Sink middle{&pool, {}, &engine};
  Sink last{&pool, {}, &engine};
  explicit TwoLinks(int64_t second_buffer_bytes)
      : first(&engine, &pool, &arena, &drops, PortRig::Config(0, 0)),
        back(&engine, &pool, &arena, &drops, PortRig::Config(1, 0)),
        second(&engine, &pool, &arena, &drops, PortRig::Config(1, second_buffer_bytes)),
        second_back(&engine, &pool, &arena, &drops, PortRig::Config(2, 0)) {
    first.Connect(&back, &Sink::Receive, &middle, nullptr, /*forwards=*/true);
    second.Connect(&second_back, &Sink::Receive, &last);
    // The reverse directions, which report what their peers delivered.
    back.Connect(&first, &Sink::Receive, &middle);
    second_back.Connect(&second, &Sink::Receive, &last);
  }
};

TEST(PortTest, PathCarriesPacketsAcrossForwardingEnds) {
  // The second port has a buffer: what it holds for the forwarded packet
  // shows the size and class the packet left the first port with.
  TwoLinks links(3000);
  auto& [engine, pool, arena, drops, first, back, second, second_back, middle, last] = links;
  QpFlow routed;
  routed.path[0] = &first;
  routed.path[1] = &second;
  QpFlow unrouted;
  for (uint32_t i = 0; i < 2; ++i) {
    Packet* p = pool.Alloc();
    p->wire_bytes = static_cast<uint16_t>(1000 + i);
    p->psn = 7 + i;
    p->buffer_class = 5;
    p->flow = i == 0 ? &routed : &unrouted;
    first.Send(p);
  }
  // Halfway through its serialization at the second port.
  engine.Run(Picoseconds(801000 + 400000));
  EXPECT_EQ(second.queued_bytes(5), 1000);
  EXPECT_EQ(second.queued_bytes(0), 0);
  engine.Run();
  // 800 ns to serialize and 1 ns of cable, per link.
  ASSERT_EQ(last.arrivals.size(), 1u);
  EXPECT_EQ(last.arrivals[0], 2 * 801000);
  EXPECT_EQ(last.hops[0], 2);
  EXPECT_EQ(last.psns[0], 7u);
  ASSERT_EQ(middle.arrivals.size(), 1u);
  EXPECT_EQ(middle.arrivals[0], 800000 + 1001 * 800 + 1000);
  EXPECT_EQ(middle.hops[0], 1);
  EXPECT_EQ(middle.psns[0], 8u);
  EXPECT_EQ(second.counters().port_xmit_packets, 1u);
  EXPECT_EQ(second_back.counters().port_rcv_packets, 1u);
  EXPECT_EQ(back.counters().port_rcv_packets, 2u);
  EXPECT_EQ(back.counters().port_rcv_data, 980u + 981u);
}

// A frame corrupted on the wire is dropped where it arrives, also where
// its path would forward it; it is counted as a receive error there.
TEST(PortTest, CorruptedPacketIsNotForwardedByItsPath) {
  PortRig rig(0);
  Port onward(&rig.engine, &rig.pool, &rig.arena, &rig.drops, PortRig::Config(1, 0));
  Sink far{&rig.pool, {}, &rig.engine};
  onward.Connect(&rig.tx, &Sink::Receive, &far);
  rig.tx.Connect(&rig.rx, &Sink::Receive, &rig.sink, nullptr, /*forwards=*/true);
  ScriptedFaults faults{{{ImpairmentVerdict::kCorrupt, {}}}};
  const Impairment hook = faults.hook();
  rig.tx.set_impairment(&hook);
  QpFlow routed;
  routed.path[0] = &rig.tx;
  routed.path[1] = &onward;
  for (int i = 0; i < 2; ++i) {
    Packet* p = rig.pool.Alloc();
    p->wire_bytes = 1000;
    p->psn = 40 + i;
    p->flow = &routed;
    rig.tx.Send(p);
  }
  rig.engine.Run();
  EXPECT_EQ(far.psns, (std::vector<uint32_t>{41}));
  EXPECT_TRUE(rig.sink.arrivals.empty());
  EXPECT_EQ(rig.drops.by_reason[static_cast<size_t>(DropReason::kBadIcrc)], 1u);
  EXPECT_EQ(rig.rx.counters().port_rcv_errors, 1u);
  EXPECT_EQ(rig.rx.counters().port_rcv_packets, 2u);
  EXPECT_EQ(rig.pool.in_use(), 0u);
}

// A packet in flight counts as in use in its pool (the run's peak of
// packets in flight), whatever form its port holds it in, and the receiver
// gets a pool packet with every field it was sent with.
TEST_P(PortFormTest, InFlightPacketsCountInTheirPoolAndArriveWhole) {
  PortRig rig(0, GetParam());
  for (uint32_t i = 0; i < 40; ++i) {  // past the ring's first 16 entries
    Packet* p = rig.pool.Alloc();
    p->flow = &rig.flow;
    p->wire_bytes = 1000;
    p->psn = (0xFFFFF0 + i) & 0xFFFFFF;  // across the 24-bit PSN's wrap
    p->opcode = i % 2 == 0 ? Opcode::kRdmaWriteMiddle : Opcode::kSendMiddle;
    p->ack_req = i % 3 == 0;
    p->ecn_ce = i % 5 == 0;
    p->hops = 2;
    rig.tx.Send(p);
  }
  EXPECT_EQ(rig.pool.in_use(), 40u);
  EXPECT_EQ(rig.pool.peak_in_use(), 40u);
  struct Seen {
    uint32_t psn;
    Opcode opcode;
    bool ack_req;
    bool ecn_ce;
    uint8_t hops;
    uint16_t wire_bytes;
  };
  static std::vector<Seen> seen;
  seen.clear();
  rig.tx.Connect(
      &rig.rx,
      [](void* obj, Packet* p, int32_t) {
        seen.push_back(
            {p->psn, p->opcode, p->ack_req != 0, p->ecn_ce != 0, p->hops, p->wire_bytes});
        static_cast<PacketPool*>(obj)->Free(p);
      },
      &rig.pool);
  rig.engine.Run();
  ASSERT_EQ(seen.size(), 40u);
  for (uint32_t i = 0; i < 40; ++i) {
    EXPECT_EQ(seen[i].psn, (0xFFFFF0 + i) & 0xFFFFFF) << i;
    EXPECT_EQ(seen[i].opcode, i % 2 == 0 ? Opcode::kRdmaWriteMiddle : Opcode::kSendMiddle) << i;
    EXPECT_EQ(seen[i].ack_req, i % 3 == 0) << i;
    EXPECT_EQ(seen[i].ecn_ce, i % 5 == 0) << i;
    EXPECT_EQ(seen[i].hops, 3) << i;
    EXPECT_EQ(seen[i].wire_bytes, 1000) << i;
  }
  EXPECT_EQ(rig.pool.in_use(), 0u);
  EXPECT_EQ(rig.rx.counters().port_rcv_packets, 40u);
  EXPECT_EQ(rig.rx.counters().port_rcv_data, 40 * 980u);
}

// Full-size packets forwarded by their route into a port with a fault model
// reach the model whole (as pool packets) and take its verdicts as any
// other packet: lost, corrupted (dropped where it arrives), delayed.
TEST(PortTest, CompactPacketsMeetAFaultModelWhole) {
  TwoLinks links(0);
  auto& [engine, pool, arena, drops, first, back, second, second_back, middle, last] = links;
  struct Seen {
    std::vector<uint32_t> psns;
    std::vector<uint16_t> wire;
    static ImpairmentVerdict Decide(void* ctx, const Packet& p, uint32_t bytes, Picoseconds) {
      auto* self = static_cast<Seen*>(ctx);
      self->psns.push_back(p.psn);
      self->wire.push_back(static_cast<uint16_t>(bytes));
      switch (self->psns.size()) {
        case 1:
          return {ImpairmentVerdict::kDrop, {}};
        case 2:
          return {ImpairmentVerdict::kCorrupt, {}};
        case 3:
          return {ImpairmentVerdict::kDelay, Picoseconds(2000000)};
        default:
          return {};
      }
    }
  } seen;
  const Impairment hook{&Seen::Decide, &seen};
  second.set_impairment(&hook);
  QpFlow routed;
  routed.path[0] = &first;
  routed.path[1] = &second;
  routed.full_wire_bytes = 1000;
  for (uint32_t i = 0; i < 5; ++i) {
    Packet* p = pool.Alloc();
    p->flow = &routed;
    p->wire_bytes = 1000;
    p->psn = 100 + i;
    first.Send(p);
  }
  engine.Run();
  EXPECT_EQ(seen.psns, (std::vector<uint32_t>{100, 101, 102, 103, 104}));
  EXPECT_EQ(seen.wire, (std::vector<uint16_t>(5, 1000)));
  // 100 lost, 101 corrupted; 102 delayed by 2 us behind 103 and 104.
  EXPECT_EQ(last.psns, (std::vector<uint32_t>{103, 104, 102}));
  EXPECT_EQ(last.hops, (std::vector<int>{2, 2, 2}));
  EXPECT_TRUE(middle.arrivals.empty());
  EXPECT_EQ(drops.by_reason[static_cast<size_t>(DropReason::kImpairment)], 1u);
  EXPECT_EQ(drops.by_reason[static_cast<size_t>(DropReason::kBadIcrc)], 1u);
  EXPECT_EQ(second_back.counters().port_rcv_packets, 4u);  // the lost one never arrived
  EXPECT_EQ(second_back.counters().port_rcv_errors, 1u);
  EXPECT_EQ(pool.in_use(), 0u);
}

// What a compact entry cannot hold goes as a pool packet, with the same
// timing: an arrival past 2^48 ps (281 s of virtual time), and a hop count
// past 7 (a route of kPathMax links never needs more).
TEST(PortTest, PacketsACompactEntryCannotHoldTravelAsPoolPackets) {
  for (const bool far : {false, true}) {
    Engine engine;
    PacketPool pool;
    HugePageArena arena;
    DropStats drops;
    PortConfig config = PortRig::Config(0, 0);
    const int64_t cable = far ? int64_t{300} * 1000000000000 : 1000;  // 300 s, or 1 ns
    config.latency = Picoseconds(cable);
    Port tx(&engine, &pool, &arena, &drops, config);
    Port rx(&engine, &pool, &arena, &drops, PortRig::Config(1, 0));
    Sink sink{&pool, {}, &engine};
    tx.Connect(&rx, &Sink::Receive, &sink);
    rx.Connect(&tx, &Sink::Receive, &sink);
    QpFlow flow;
    flow.full_wire_bytes = 1000;
    for (uint8_t hops : {0, 6, 7, 9}) {
      Packet* p = pool.Alloc();
      p->flow = &flow;
      p->wire_bytes = 1000;
      p->psn = hops;
      p->hops = hops;
      tx.Send(p);
    }
    EXPECT_EQ(pool.in_use(), 4u);
    engine.Run();
    EXPECT_EQ(sink.arrivals, (std::vector<int64_t>{cable + 800000, cable + 1600000, cable + 2400000,
                                                   cable + 3200000}))
        << far;
    EXPECT_EQ(sink.hops, (std::vector<int>{1, 7, 8, 10})) << far;
    EXPECT_EQ(sink.psns, (std::vector<uint32_t>{0, 6, 7, 9})) << far;
    EXPECT_EQ(pool.in_use(), 0u) << far;
  }
}

}  // namespace
}  // namespace fathom::sim
