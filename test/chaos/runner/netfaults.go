package runner

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// The network faults last their drawn hold whatever the run does
// meanwhile, and are always lifted; their rules also stop matching on their
// own a minute after the hold should the lift not happen.

// partition cuts the member off for hold, then heals it. The rules lift
// themselves a little after hold should the heal not happen.
func (r *run) partition(ctx context.Context, name string, hold time.Duration) error {
	pod, err := r.env.Clientset.CoreV1().Pods(r.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := framework.PartitionPod(ctx, pod, time.Now().Add(hold+time.Minute)); err != nil {
		return err
	}
	// The partition is the fault itself: it lasts its drawn hold whatever
	// the run does meanwhile, and is always healed.
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	healCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return framework.HealPartition(healCtx, pod)
}

// peerLoss makes the member lose percent of its packets on the peer port,
// both ways, for hold, then heals it. The rule stops matching on its own a
// little after hold should the heal not happen.
func (r *run) peerLoss(ctx context.Context, name string, hold time.Duration, percent int) error {
	pod, err := r.env.Clientset.CoreV1().Pods(r.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := framework.LosePackets(ctx, pod, time.Now().Add(hold+time.Minute), percent, v1alpha1.PeerPort); err != nil {
		return err
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	healCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return framework.HealPacketLoss(healCtx, pod)
}

// peerLatency holds each of the member's packets on the peer port, both
// ways, for the latency the issue asks of netem (75 ms, give or take 50)
// for hold, then lifts it; the note says how many packets were held.
func (r *run) peerLatency(ctx context.Context, name string, f chaos.Fault, rec *chaos.FaultRecord) error {
	pod, err := r.env.Clientset.CoreV1().Pods(r.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	span := framework.DelaySpan{Mean: chaos.PeerLatencyMean, Jitter: chaos.PeerLatencyJitter}
	d, err := framework.DelayPackets(ctx, pod, time.Now().Add(f.Hold+time.Minute), span, f.Pick, v1alpha1.PeerPort)
	if err != nil {
		return err
	}
	waitHold(ctx, f.Hold)
	liftCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held, err := d.Lift(liftCtx)
	_, misread := d.Held()
	rec.Note = fmt.Sprintf("%d peer packets held %s±%s for %s (%d reads of the queue failed)", held, span.Mean, span.Jitter, f.Hold.Round(100*time.Millisecond), misread)
	return err
}

// waitHold waits the fault's hold, or until ctx ends.
func waitHold(ctx context.Context, hold time.Duration) {
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// slowDisk throttles the member's writes to its data dir's device for hold,
// then lifts the limit; the note says how many writes etcd got through
// meanwhile.
func (r *run) slowDisk(ctx context.Context, name string, f chaos.Fault, rec *chaos.FaultRecord) error {
	t, err := r.env.ThrottleDisk(ctx, r.cfg.Namespace, name, f.IOPS, time.Now().Add(f.Hold+time.Minute))
	if err != nil {
		return err
	}
	waitHold(ctx, f.Hold)
	writes, err := t.Lift()
	rec.Note = fmt.Sprintf("%d write IOPS on %s for %s: %d writes made", f.IOPS, t.Device, f.Hold.Round(100*time.Millisecond), writes)
	return err
}
