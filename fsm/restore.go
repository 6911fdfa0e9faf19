package fsm

import (
	"fmt"

	"github.com/baristahq/barista/sfq"
)

// Numbers are what a cluster hands out that a client may hold:
// the next job's ID and the next event's seq.
type Numbers struct {
	NextJob   sfq.JobID
	NextEvent uint64
}

// HandedOut returns the numbers the state hands out next.
func (f *FSM) HandedOut() Numbers {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return Numbers{NextJob: f.sched.NextJobID(), NextEvent: f.nextEvent}
}

// RaiseNumbers makes a state about to replace the cluster's (a restore
// of a backup) hand out no ID or seq the cluster handed out before: the
// next job's ID rises to at least c.NextJob (no job is renumbered; IDs
// are not contiguous anyway), and when its next event seq is below
// c.NextEvent, its retained events, its webhooks' cursors and its next
// seq are all numbered higher by the difference, so that the history it
// keeps reads as before, above every seq handed out. f must be a state
// no one reads yet (freshly restored).
func (f *FSM) RaiseNumbers(c Numbers) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.sched.RaiseNextJob(c.NextJob); err != nil {
		return err
	}
	if c.NextEvent <= f.nextEvent {
		return nil
	}
	if c.NextEvent > sfq.MaxID {
		return fmt.Errorf("%w: next event seq %d is past %d", sfq.ErrOverflow, c.NextEvent, uint64(sfq.MaxID))
	}
	d := c.NextEvent - f.nextEvent
	f.events.shift(d)
	f.nextEvent = c.NextEvent
	for i := range f.webhooks {
		w := &f.webhooks[i]
		w.Cursor += d
		if w.GapTo != 0 {
			w.GapFrom, w.GapTo = w.GapFrom+d, w.GapTo+d
		}
	}
	return nil
}
