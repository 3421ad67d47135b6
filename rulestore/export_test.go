package rulestore

// BindingFieldRows are bindingFields' name, Syntax and Default, for the
// docs test of the external test package.
func BindingFieldRows() [][3]string {
	rows := make([][3]string, len(bindingFields))
	for i, bf := range bindingFields {
		rows[i] = [3]string{bf.name, bf.syntax, bf.def}
	}
	return rows
}
