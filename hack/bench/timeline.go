package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// A timeline shows where a bootstrap or a scale spent its time: the
// operator's Events (to the microsecond), the Pods' own milestones (to the
// second, as the API server keeps them) and every change of the cluster's
// Progressing message, which the bench samples while it waits and which
// names what the operator waited for. Printed, never asserted.
type timeline struct {
	start   time.Time
	mu      sync.Mutex
	entries []entry
	stop    func()
	done    chan struct{}
}

type entry struct {
	at   time.Time
	what string
}

// watchProgress samples the cluster's Progressing and Ready conditions every
// 100 ms from start until stopped, recording each change.
func watchProgress(ctx context.Context, c client.Client, ns, name string, start time.Time) *timeline {
	ctx, cancel := context.WithCancel(ctx)
	t := &timeline{start: start, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		last := ""
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			cl := &v1alpha1.EtcdCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err == nil {
				now := ""
				if p := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ProgressingCondition); p != nil {
					now = fmt.Sprintf("Progressing=%s %s: %s", p.Status, p.Reason, p.Message)
				}
				if r := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ReadyCondition); r != nil {
					now += fmt.Sprintf(" | Ready=%s %s", r.Status, r.Reason)
				}
				if now != last {
					t.add(time.Now(), "status  "+now)
					last = now
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return t
}

func (t *timeline) add(at time.Time, what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, entry{at: at, what: what})
}

// finish stops the sampling, adds the Events and Pod milestones since the
// start, and prints the whole in time order, relative to the start.
func (t *timeline) finish(ctx context.Context, c client.Client, ns, name, title string) {
	t.stop()
	<-t.done
	if err := t.collect(ctx, c, ns, name); err != nil {
		fmt.Printf("timeline %s: %v\n", title, err)
	}
	sort.SliceStable(t.entries, func(i, j int) bool { return t.entries[i].at.Before(t.entries[j].at) })
	fmt.Printf("\ntimeline: %s\n", title)
	for _, e := range t.entries {
		fmt.Printf("  %+7.2fs %s\n", e.at.Sub(t.start).Seconds(), e.what)
	}
}

func (t *timeline) collect(ctx context.Context, c client.Client, ns, name string) error {
	var members v1alpha1.EtcdMemberList
	if err := c.List(ctx, &members, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name}); err != nil {
		return err
	}
	ours := map[string]bool{name: true}
	for _, m := range members.Items {
		ours[m.Name] = true
		t.since(m.CreationTimestamp.Time, "member  "+m.Name+" created")
	}
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range events.Items {
		if !ours[e.Regarding.Name] {
			continue
		}
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.DeprecatedLastTimestamp.Time
		}
		t.since(at, fmt.Sprintf("event   %s/%s %s: %s", e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note))
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name}); err != nil {
		return err
	}
	for _, p := range pods.Items {
		t.since(p.CreationTimestamp.Time, "pod     "+p.Name+" created")
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case corev1.PodScheduled:
				t.since(cond.LastTransitionTime.Time, "pod     "+p.Name+" scheduled on "+p.Spec.NodeName)
			case corev1.PodReady:
				t.since(cond.LastTransitionTime.Time, "pod     "+p.Name+" Ready")
			}
		}
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if r := cs.State.Running; r != nil {
				t.since(r.StartedAt.Time, fmt.Sprintf("pod     %s container %s started (restarts %d)", p.Name, cs.Name, cs.RestartCount))
			}
			if x := cs.State.Terminated; x != nil {
				t.since(x.StartedAt.Time, fmt.Sprintf("pod     %s container %s started", p.Name, cs.Name))
				t.since(x.FinishedAt.Time, fmt.Sprintf("pod     %s container %s finished (%s)", p.Name, cs.Name, x.Reason))
			}
			if x := cs.LastTerminationState.Terminated; x != nil {
				t.since(x.FinishedAt.Time, fmt.Sprintf("pod     %s container %s exited %d earlier (%s)", p.Name, cs.Name, x.ExitCode, x.Reason))
			}
		}
	}
	return nil
}

// since records an entry at or after the start; Pod times are kept to the
// second, so one a second early still belongs to this step.
func (t *timeline) since(at time.Time, what string) {
	if at.IsZero() || at.Before(t.start.Truncate(time.Second)) {
		return
	}
	t.add(at, what)
}
