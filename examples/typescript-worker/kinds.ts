// The kinds of jobs this example's worker runs, and the payload of each:
// the submitting program and the worker share this type, so that a
// submit's payload and a function's job.payload are checked alike.
export interface Kinds {
  // The result is {"words": N, "lines": N}.
  wordcount: { text: string };
  // Waits that long (a cancel stops the wait); the result is "waited Ns".
  wait: { seconds: number };
}
