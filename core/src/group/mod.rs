//! Instance groups (issue 7, in progress): groups of identical members rolled
//! to a new launch configuration batch by batch. So far: member naming and
//! batching ([`naming`]), the part seed 002 specifies exactly.

pub mod naming;
