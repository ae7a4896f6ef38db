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
  static void Receive(void* obj, Packet* p, int32_t) {
    auto* s = static_cast<Sink*>(obj);
    s->arrivals.push_back(s->engine->Now().ps());
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
    p->wire_bytes = 1000;
    tx.Send(p);
  }
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

}  // namespace
}  // namespace fathom::sim
