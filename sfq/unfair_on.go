//go:build unfairpick

package sfq

// unfairPick makes the fair pick take the last eligible candidate of the
// worker's own size instead of the first (worstFair): a build for the tests
// that show the evidence of fairness catching an unfair order
// (go test -tags unfairpick). No release is built with it.
const unfairPick = true
