// Package scenario runs the lesson's experiments that are more than one
// flood: the retry storm and the amplifier of task 4 ([Storm], [Amplify]),
// the judge's client strategies against the fake Messages API of task 5
// ([Judge]), the dead dependency behind a circuit breaker of task 7
// ([RunDependency]), the four counting limiters of task 8
// ([MeasureCounting]) and the token-bucket plays ([LessonPlays]).
//
// Each takes the code under test as a function value or an interface, runs
// on whichever clock its caller's goroutine lives on (a synctest bubble or
// the wall clock), and returns a results type. Floods themselves, their
// schedules and the reading of a server's counters are package harness's.
package scenario
