package denc

// EntityInst is Ceph's entity_inst_t: an entity's name and its address.
type EntityInst struct {
	Name EntityName
	Addr EntityAddr
}

// Decode reads an entity_inst_t.
func (i *EntityInst) Decode(d *Decoder) {
	i.Name.Decode(d)
	i.Addr.Decode(d)
}

// Encode writes an entity_inst_t with the modern address encoding.
func (i EntityInst) Encode(e *Encoder) {
	i.Name.Encode(e)
	i.Addr.Encode(e)
}

// String returns "name addr", as Ceph prints it.
func (i EntityInst) String() string { return i.Name.String() + " " + i.Addr.String() }
