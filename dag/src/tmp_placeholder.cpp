// temporary: replaced by the DAG IR sources
namespace strata::dag {
int placeholder_symbol_dag() { return 0; }
}  // namespace strata::dag
