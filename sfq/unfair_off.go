//go:build !unfairpick

package sfq

// unfairPick is false in every build but a test build with the unfairpick
// tag (unfair_on.go), where the fair pick takes the last candidate instead
// of the first.
const unfairPick = false
