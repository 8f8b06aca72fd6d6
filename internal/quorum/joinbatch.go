package quorum

// Joiner is a learner etcd lists that has not started yet, as the decision
// to add another learner beside it sees it.
type Joiner struct {
	// Handed: the member has been given etcd's member list, so its Pod may
	// be starting now with that list.
	Handed bool
	// Plain: a scale-up's member, not the replacement of another (self-heal,
	// rollout), whose add the operator must not hold up.
	Plain bool
}

// HoldJoinerLists reports whether the joiners' member lists are held back
// so that another learner can be added first and all of them start
// together (docs/design/0027). etcd refuses a joiner's first start when
// its --initial-cluster counts other members than etcd lists, so a learner
// added after another was handed its list must wait for that one to start,
// and learners would join one after another, each paying for its volume,
// its scheduling and etcd's start in turn. A joiner that has not been
// handed its list has no Pod, so another add cannot race its start.
//
// It holds only while the next pass's step is that add: more members are
// wanted (counted < desired), etcd has a learner slot free, every learner is
// such a joiner, and nothing holds the scale-up itself (canAdd: the version
// is not refused and every member that holds data is ready). Otherwise the
// lists are handed out at once, as without this rule. Each add is still one
// membership change of its own, and learners do not vote, so no quorum is
// changed by holding them.
func HoldJoinerLists(learners []Joiner, counted, desired, maxLearners int, canAdd bool) bool {
	if !canAdd || counted >= desired || len(learners) == 0 || len(learners) >= maxLearners {
		return false
	}
	for _, l := range learners {
		if l.Handed || !l.Plain {
			return false
		}
	}
	return true
}
