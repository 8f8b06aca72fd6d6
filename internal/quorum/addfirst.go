package quorum

// AddBeforePromoting reports whether a scale-up adds its next learner before
// promoting the learners that have started (docs/design/0027).
//
// After a promotion etcd refuses the next add until every voter it needs
// for a quorum of the larger membership has been connected for 5 s (its
// strict reconfiguration check, HealthInterval); the new voter has only
// just connected, so with one or two voters before it the add waits about
// 5 s. Added before the promotion, the learner is checked against the
// voters that were already there, and promotions have no such window, so
// the started learner is promoted in the next pass while the new one
// starts. Learners do not vote: the add changes no quorum.
//
// It holds only when the add is the next step: more members are wanted
// (counted < desired), etcd has a learner slot free, every learner has
// started (etcd refuses a joiner whose --initial-cluster misses a member
// added since, so an unstarted one must start first), and nothing else
// holds the scale-up (canAdd).
func AddBeforePromoting(learnersStarted []bool, counted, desired, maxLearners int, canAdd bool) bool {
	if !canAdd || counted >= desired || len(learnersStarted) == 0 || len(learnersStarted) >= maxLearners {
		return false
	}
	for _, started := range learnersStarted {
		if !started {
			return false
		}
	}
	return true
}
