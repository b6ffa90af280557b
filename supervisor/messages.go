package supervisor

// definitions is the scanner's view of agent/: the valid definition names.
type definitions struct{ names []string }
