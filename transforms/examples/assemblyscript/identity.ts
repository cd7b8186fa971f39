// identity (batch ABI): every input record, unchanged, to the first output topic.
import { Record, onRecord, writeRecord } from "../../sdk/assemblyscript/sluice";
export { sluice_batch_input, sluice_batch_process, _start } from "../../sdk/assemblyscript/sluice";

onRecord((r: Record): void => {
  writeRecord(0, r);
});
