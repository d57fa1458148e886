// Original file: proto/tarcil/v1/scheduler.proto


export interface AdmissionVerdict {
  /**
   * admit | queue | best-effort
   */
  'action'?: (string);
  'reason'?: (string);
  'buckets'?: (number)[];
  'acceptableFree'?: (number);
  'totalFree'?: (number);
  'needed'?: (number);
  'estimateMs'?: (number | string);
  'boundMs'?: (number | string);
  'f'?: (number | string);
  '_estimateMs'?: "estimateMs";
  '_boundMs'?: "boundMs";
}

export interface AdmissionVerdict__Output {
  /**
   * admit | queue | best-effort
   */
  'action': (string);
  'reason': (string);
  'buckets': (number)[];
  'acceptableFree': (number);
  'totalFree': (number);
  'needed': (number);
  'estimateMs'?: (number);
  'boundMs'?: (number);
  'f': (number);
  '_estimateMs'?: "estimateMs";
  '_boundMs'?: "boundMs";
}
