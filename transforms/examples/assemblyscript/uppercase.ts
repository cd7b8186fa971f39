// uppercase (batch ABI): the value with ASCII a-z made upper case; key and headers kept; a
// null value stays null.
import { Record, onRecord, writeWithValue } from "../../sdk/assemblyscript/sluice";
export { sluice_batch_input, sluice_batch_process, _start } from "../../sdk/assemblyscript/sluice";

onRecord((r: Record): void => {
  const v = writeWithValue(0, r, r.valueLen);
  for (let i = 0; i < r.valueLen; i++) {
    const b = load<u8>(r.valuePtr + i);
    store<u8>(v + i, b >= 0x61 && b <= 0x7a ? b - 32 : b);
  }
});
