package nbd

// InService reports how many requests s is timing right now (tests wait
// for a handler to finish after its reply reached the client).
func (s *ServiceTimes) InService() int64 { return s.open[0].Load() + s.open[1].Load() }
