package framework

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	nfqueue "github.com/florianl/go-nfqueue"
	corev1 "k8s.io/api/core/v1"
)

// A packet delay holds each of one Pod's TCP packets on some ports, both
// ways, for a random time before letting it go: latency on a link, as tc
// netem gives. The kernel of the machines this runs on has no sch_netem
// ("Specified qdisc kind is unknown"), and neither tbf nor htb can add a
// fixed delay (they queue only what exceeds a rate), so the packets are
// handed to this process instead: an iptables NFQUEUE rule in the Pod's own
// network namespace queues them, and a netlink socket opened in that
// namespace gives each its verdict, accept, once its delay has passed.
//
// Nothing may stay behind:
//   - the rule carries --queue-bypass, so with no process listening on the
//     queue (this one ended, whatever the reason) packets pass as if there
//     were no rule; and it stops matching at the planned end on its own
//     (xt_time --datestop);
//   - the queue fails open: a packet that finds it full passes undelayed;
//   - Lift removes the chain first, then waits for the packets held to be
//     let go, then closes the socket.

// PacketDelayChain is the chain a packet delay installs in a Pod's network
// namespace.
const PacketDelayChain = "QLC-PACKETDELAY"

// packetDelayQueue is the NFQUEUE number; queues are per network namespace.
const packetDelayQueue = 2380

// maxHeldPackets bounds the queue; more packets pass undelayed.
const maxHeldPackets = 4096

// packetDelayRules are the iptables commands, without the binary, that
// queue the TCP packets on ports (as source or destination) to queue until
// the UTC time until.
func packetDelayRules(until time.Time, queue int, ports ...int) ([][]string, error) {
	if len(ports) == 0 {
		return nil, errors.New("a packet delay needs at least one port")
	}
	stop := until.UTC().Format("2006-01-02T15:04:05")
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(p))
	}
	rules := [][]string{
		{"-N", PacketDelayChain},
		{"-F", PacketDelayChain},
		{"-A", PacketDelayChain, "-p", "tcp", "-m", "multiport", "--ports", strings.Join(ps, ","),
			"-m", "time", "--datestop", stop, "--utc",
			"-m", "comment", "--comment", "e2e packet delay until " + stop + " UTC",
			"-j", "NFQUEUE", "--queue-num", strconv.Itoa(queue), "--queue-bypass"},
	}
	for _, hook := range partitionHooks {
		rules = append(rules, []string{"-I", hook, "1", "-j", PacketDelayChain})
	}
	return rules, nil
}

// Span of a delay: each packet is held from Mean-Jitter to Mean+Jitter,
// uniformly.
type DelaySpan struct{ Mean, Jitter time.Duration }

func (s DelaySpan) draw(rng *rand.Rand) time.Duration {
	if s.Jitter <= 0 {
		return s.Mean
	}
	return s.Mean - s.Jitter + time.Duration(rng.Int64N(int64(2*s.Jitter)+1))
}

// PacketDelay is a delay in place.
type PacketDelay struct {
	pid    int
	nsFile *os.File
	nf     *nfqueue.Nfqueue
	cancel context.CancelFunc
	span   DelaySpan

	mu      sync.Mutex
	rng     *rand.Rand
	lifted  bool
	held    int
	errs    []error
	misread int
	pending sync.WaitGroup
}

// DelayPackets holds each of the Pod's TCP packets on the given ports for a
// time drawn from span, until Lift, or until the time until at the latest.
// A delay already in place is replaced.
func DelayPackets(ctx context.Context, pod *corev1.Pod, until time.Time, span DelaySpan, seed uint64, ports ...int) (*PacketDelay, error) {
	pid, err := podNetns(ctx, pod)
	if err != nil {
		return nil, err
	}
	d, err := delayNetns(ctx, pid, until, span, seed, ports...)
	if err != nil {
		return nil, fmt.Errorf("failed to delay the packets of pod %s/%s on %v: %w", pod.Namespace, pod.Name, ports, err)
	}
	return d, nil
}

// delayNetns listens on the queue in the namespace of pid, then installs the
// rules that feed it.
func delayNetns(ctx context.Context, pid int, until time.Time, span DelaySpan, seed uint64, ports ...int) (*PacketDelay, error) {
	rules, err := packetDelayRules(until, packetDelayQueue, ports...)
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("failed to open the network namespace of %d: %w", pid, err)
	}
	nf, err := nfqueue.Open(&nfqueue.Config{
		NetNS: int(f.Fd()), NfQueue: packetDelayQueue, MaxQueueLen: maxHeldPackets,
		Copymode: nfqueue.NfQnlCopyMeta, Flags: nfqueue.NfQaCfgFlagFailOpen, WriteTimeout: time.Second,
	})
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("failed to open netfilter queue %d in the namespace of %d: %w", packetDelayQueue, pid, err)
	}
	d := &PacketDelay{pid: pid, nsFile: f, nf: nf, span: span, rng: rand.New(rand.NewPCG(seed, uint64(pid)))}
	listen, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	if err := nf.RegisterWithErrorFunc(listen, d.hold, d.readError); err != nil {
		d.close()
		return nil, fmt.Errorf("failed to listen on netfilter queue %d: %w", packetDelayQueue, err)
	}
	if err := installChain(ctx, pid, PacketDelayChain, rules); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// hold lets a packet go once its delay has passed.
func (d *PacketDelay) hold(a nfqueue.Attribute) int {
	if a.PacketID == nil {
		return 0
	}
	id := *a.PacketID
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lifted {
		_ = d.nf.SetVerdict(id, nfqueue.NfAccept)
		return 0
	}
	d.held++
	d.pending.Add(1)
	time.AfterFunc(d.span.draw(d.rng), func() {
		defer d.pending.Done()
		if err := d.nf.SetVerdict(id, nfqueue.NfAccept); err != nil {
			d.mu.Lock()
			d.errs = append(d.errs, err)
			d.mu.Unlock()
		}
	})
	return 0
}

// readError keeps the listener going until the delay is lifted: a read that
// ran out of buffer costs a packet, which TCP sends again, no more.
func (d *PacketDelay) readError(error) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lifted {
		return 1
	}
	d.misread++
	return 0
}

// Held is how many packets were held so far, and how many reads of the
// queue failed.
func (d *PacketDelay) Held() (held, misread int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held, d.misread
}

// Lift removes the rules, lets every held packet go and stops listening.
// Packets the kernel queued but this process had not read yet when it stops
// are dropped with the queue, and TCP sends them again. It returns how many
// packets were held and the first error of a verdict, if any.
func (d *PacketDelay) Lift(ctx context.Context) (int, error) {
	err := healChain(ctx, d.pid, PacketDelayChain)
	d.mu.Lock()
	d.lifted = true
	d.mu.Unlock()
	d.pending.Wait()
	d.close()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && len(d.errs) > 0 {
		err = fmt.Errorf("%d packets of %d held were not let go or not read: %w", len(d.errs), d.held, d.errs[0])
	}
	return d.held, err
}

func (d *PacketDelay) close() {
	if d.cancel != nil {
		d.cancel()
	}
	_ = d.nf.Close()
	_ = d.nsFile.Close()
}
