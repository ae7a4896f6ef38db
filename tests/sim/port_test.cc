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
  explicit PortRig(int64_t buffer_bytes)
      : tx(&engine, &pool, &arena, &drops, Config(0, buffer_bytes)),
        rx(&engine, &pool, &arena, &drops, Config(1, 0)) {
    tx.Connect(&rx, &Sink::Receive, &sink);
    rx.Connect(&tx, &Sink::Receive, &sink);
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

TEST(PortTest, BufferAccountCountsOnlyWhatIsNotYetSerialized) {
  PortRig rig(3000);
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
}

TEST(PortTest, UnbufferedPortKeepsNoAccountAndDropsNothing) {
  PortRig rig(0);
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
TEST(PortTest, PathCarriesPacketsAcrossForwardingEnds) {
  Engine engine;
  PacketPool pool;
  HugePageArena arena;
  DropStats drops;
  Port first(&engine, &pool, &arena, &drops, PortRig::Config(0, 0));
  Port back(&engine, &pool, &arena, &drops, PortRig::Config(1, 0));
  // The second port has a buffer: what it holds for the forwarded packet
  // shows the size and class the packet left the first port with.
  Port second(&engine, &pool, &arena, &drops, PortRig::Config(1, 3000));
  Port second_back(&engine, &pool, &arena, &drops, PortRig::Config(2, 0));
  Sink middle{&pool, {}, &engine};
  Sink last{&pool, {}, &engine};
  first.Connect(&back, &Sink::Receive, &middle, nullptr, /*forwards=*/true);
  second.Connect(&second_back, &Sink::Receive, &last);
  // The reverse directions, which report what their peers delivered.
  back.Connect(&first, &Sink::Receive, &middle);
  second_back.Connect(&second, &Sink::Receive, &last);
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

}  // namespace
}  // namespace fathom::sim
